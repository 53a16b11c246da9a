// Package oserr holds the one way sbx words a file error.
package oserr

import (
	"errors"
	"os"
)

// WithoutPath returns the error inside an *os.PathError (the errno, say),
// or err itself: for a message that already names the path, so that it
// reads "--input-dir /x: no such file or directory", not "--input-dir
// /x: open /x: no such file or directory". errors.Is(err, unix.ENOENT)
// still holds of the result.
func WithoutPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
