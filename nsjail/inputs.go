package nsjail

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sbx-sandbox/sbx/internal/units"
)

// Input caps: inputs are streamed through a pipe into a tmpfs, so they
// are bounded in number and size before anything is read.
const (
	MaxInputFiles = 10000
)

// InputsFromDir lists the regular files below dir as inputs, at the same
// relative paths in the workspace. Symlinks are not followed (and not
// taken), nor are FIFOs, sockets or devices: each one skipped is named in
// the returned warnings. It fails past MaxInputFiles files or maxBytes
// bytes in all. An empty dir is an empty workspace, not an error (issue
// 19, point 10).
func InputsFromDir(dir string, maxBytes int64) ([]File, []string, error) {
	var files []File
	var warnings []string
	var total int64
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--input-dir %s: %w", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("--input-dir %s: not a directory", dir)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("--input-dir %s: %w", p, unwrapPath(err))
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			warnings = append(warnings, fmt.Sprintf("--input-dir: %s skipped: not a regular file", rel))
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("--input-dir %s: %w", p, unwrapPath(err))
		}
		if len(files) == MaxInputFiles {
			return fmt.Errorf("--input-dir %s: more than %d files", dir, MaxInputFiles)
		}
		total += info.Size()
		if total > maxBytes {
			return fmt.Errorf("--input-dir %s: more than %s, the workspace's size", dir, units.HumanSize(maxBytes))
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Source: p, Mode: uint32(info.Mode().Perm())})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return files, warnings, nil
}
