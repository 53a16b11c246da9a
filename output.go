package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
