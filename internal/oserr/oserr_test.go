package oserr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestWithoutPath(t *testing.T) {
	_, err := os.Open("/nonexistent/sbx-oserr")
	if got := WithoutPath(err); got != syscall.ENOENT || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("WithoutPath(%v) = %v, want ENOENT", err, got)
	}
	if got := WithoutPath(fmt.Errorf("read: %w", err)); got != syscall.ENOENT {
		t.Errorf("wrapped: got %v, want ENOENT", got)
	}
	plain := errors.New("plain")
	if got := WithoutPath(plain); got != plain {
		t.Errorf("WithoutPath(plain) = %v", got)
	}
	if WithoutPath(nil) != nil {
		t.Error("WithoutPath(nil) is not nil")
	}
}
