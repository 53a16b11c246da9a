package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/engine"
)

// The progress bar of a pull, in both builds: `sbx image pull` (the full
// sbx's, image_cmd.go) and an image pulled on first use by `sbx exec`,
// whose flags both builds parse.

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newProgressBar is a bar for a pull of ref when stderr is a terminal and
// quiet is not set; else nil, which image.Store.Pull takes as quiet (pass
// it on as progress(): a nil *progressBar in an engine.Progress is not nil).
func newProgressBar(ref string, quiet bool) *progressBar {
	if quiet || !isTerminal(os.Stderr) {
		return nil
	}
	if ref == "" {
		ref = "the profile's image"
	}
	return &progressBar{ref: ref}
}

// progress is b as an engine.Progress: nil (quiet) when b is nil.
func (b *progressBar) progress() engine.Progress {
	if b == nil {
		return nil
	}
	return b
}

// progressBar redraws one stderr line, at most ten times a second.
type progressBar struct {
	ref  string
	last time.Time
	any  bool
}

func (b *progressBar) Update(done, total int64) {
	if now := time.Now(); now.Sub(b.last) >= 100*time.Millisecond || done == total {
		b.last, b.any = now, true
		const width = 30
		fill := 0
		if total > 0 {
			fill = int(min(done, total) * width / total)
		}
		fmt.Fprintf(os.Stderr, "\rpulling %s [%s%s] %s/%s ", b.ref, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), humanBytes(done), humanBytes(total))
	}
}

func (b *progressBar) done() {
	if b != nil && b.any {
		fmt.Fprintln(os.Stderr)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
