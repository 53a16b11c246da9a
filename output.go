package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// checkOutputEmpty refuses an --output-dir that already holds something:
// a re-run would mix its files with the earlier run's, and a file this
// run deleted or did not make again would look current (issue 19, point
// 13). --overwrite-output skips this check. A directory that is not there
// yet is fine: the run creates it.
func checkOutputEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output-dir %s: %w", dir, unwrapPath(err))
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output-dir %s: %w", dir, unwrapPath(err))
	}
	return fmt.Errorf("--output-dir %s is not empty (it holds %s): give an empty or new directory, or add --overwrite-output to write over it", dir, names[0])
}

// maxOutputWarnings bounds the warnings about --output-dir: a payload
// may make thousands of files that cannot be copied.
const maxOutputWarnings = 20

// outputWarnings names each regular file the run made or changed that did
// not reach --output-dir, with why (a symlink or a file in its way, a
// directory sbx may not write, a cap), and each file the run deleted that
// the directory still has a copy of, from an earlier run. Links, FIFOs
// and the like are listed in files and never copied, so they are not
// warned about.
func outputWarnings(files []nsjail.FileEntry, dir string) []string {
	if dir == "" {
		return nil
	}
	var ws []string
	more := 0
	add := func(w string) {
		if len(ws) < maxOutputWarnings {
			ws = append(ws, w)
		} else {
			more++
		}
	}
	for _, e := range files {
		switch {
		case e.Change == nsjail.ChangeDeleted:
			if _, err := os.Lstat(filepath.Join(dir, e.Path)); err == nil {
				add(fmt.Sprintf("--output-dir: %s was deleted by the run; %s is an older copy", e.Path, filepath.Join(dir, e.Path)))
			}
		case e.Kind == "file" && e.CopiedTo == "":
			why := strings.TrimPrefix(e.Skipped, "not copied: ")
			if why == "" {
				why = "no reason given"
			}
			add(fmt.Sprintf("--output-dir: %s not copied: %s", e.Path, why))
		}
	}
	if more > 0 {
		ws = append(ws, fmt.Sprintf("--output-dir: %d more files not copied or stale (see files in the Result)", more))
	}
	return ws
}

// resultSpliceMin is the payload's output, stdout and stderr together,
// below which writeResult indents the Result whole: for a few KiB the
// indenter costs nothing worth a second path.
const resultSpliceMin = 16 << 10

// writeResult writes res as printJSON writes any value (encoding/json,
// indented by two spaces, HTML not escaped, a final newline), byte for
// byte, without running the indenter over the payload's output. Why:
// json.Encoder's SetIndent encodes the value, then re-reads every byte of
// the encoding through the JSON scanner (appendIndent, a function call per
// byte) to lay it out; for a Result carrying 1.4 MB of output that was
// ~15 of the supervisor's ~60 ms of CPU (perf, issue 13), and two more
// buffers of the output's size, which made the GC run. Indenting leaves
// the bytes inside a string as they are, so the Result is indented with a
// random marker standing in for each stream, and each marker's quoted
// form is then replaced by the stream as encoding/json encodes a string,
// with the same options. A marker found other than exactly once (it
// cannot be, short of guessing 128 random bits) falls back to indenting
// the whole Result.
func writeResult(w io.Writer, res *nsjail.Result) error {
	if len(res.Stdout)+len(res.Stderr) < resultSpliceMin {
		return encodeIndented(w, res)
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	mark := hex.EncodeToString(nonce[:])
	r := *res
	r.Stdout, r.Stderr = "sbx-stdout-"+mark, "sbx-stderr-"+mark
	var skel bytes.Buffer
	if err := encodeIndented(&skel, &r); err != nil {
		return err
	}
	out := skel.Bytes()
	type splice struct {
		at   int
		mark string
		val  string
	}
	var sp []splice
	for _, s := range []splice{{mark: r.Stdout, val: res.Stdout}, {mark: r.Stderr, val: res.Stderr}} {
		quoted := []byte(`"` + s.mark + `"`)
		if bytes.Count(out, quoted) != 1 {
			return encodeIndented(w, res)
		}
		s.at = bytes.Index(out, quoted)
		sp = append(sp, s)
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].at < sp[j].at })
	bw := bufio.NewWriterSize(w, 64<<10)
	prev := 0
	for _, s := range sp {
		bw.Write(out[prev:s.at])
		if err := encodeString(bw, s.val); err != nil {
			return err
		}
		prev = s.at + len(s.mark) + 2
	}
	bw.Write(out[prev:])
	return bw.Flush()
}

// encodeIndented is printJSON's encoding of v, onto w.
func encodeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// encodeString writes s as encoding/json encodes a string value with HTML
// escaping off: quoted, escaped, invalid UTF-8 replaced by U+FFFD. The
// encoding goes straight to w, less the newline Encode ends it with.
func encodeString(w io.Writer, s string) error {
	enc := json.NewEncoder(dropNewline{w})
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}

// dropNewline writes what it is given but a final '\n': Encoder.Encode
// writes one value and its newline in one Write.
type dropNewline struct{ w io.Writer }

func (d dropNewline) Write(p []byte) (int, error) {
	n, err := d.w.Write(bytes.TrimSuffix(p, []byte("\n")))
	if err == nil {
		n = len(p)
	}
	return n, err
}
