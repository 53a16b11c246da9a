//go:build integration

package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestZZNothingLeftBehind runs last (files run in name order): after the
// whole suite, no sandbox cgroup, mount or process may remain on the host.
func TestZZNothingLeftBehind(t *testing.T) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := leftovers()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left on the host after the suite:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func leftovers() []string {
	var left []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), "sbx-") {
			left = append(left, "cgroup "+p)
			return filepath.SkipDir
		}
		return nil
	})
	// Sandboxes mount only in their own mount namespaces: the host's
	// table must be as it was when the suite began.
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if line != "" && !mountsAtStart[line] {
				left = append(left, "mount "+line)
			}
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte("__sbx_init")) {
			left = append(left, "process "+e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}
