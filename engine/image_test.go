package engine

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPullable(t *testing.T) {
	for ref, want := range map[string]bool{
		"python:3.11-slim": true,
		"ghcr.io/o/r@sha256:0123456789012345678901234567890123456789012345678901234567890123": true,
		"127.0.0.1:5000/t/probe:v1": true,
		"mine":                      false,
		"sbx-data":                  false,
		"localhost:5000/foo":        false,
		"BAD REF":                   false,
		"":                          false,
	} {
		if got := Pullable(ref); got != want {
			t.Errorf("Pullable(%q) = %v, want %v", ref, got, want)
		}
	}
}

// TestRootInterpreterInRootfs: in a --rootfs tree, python3 is resolved
// inside it (an absolute symlink is the tree's, never the host's), and
// the version is the one its name says.
func TestRootInterpreterInRootfs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	os.MkdirAll(filepath.Join(root, "opt"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/bin/python3.12"), []byte("#!"), 0o755)
	os.Symlink("/../../../usr/bin/python3.12", filepath.Join(root, "usr/bin/python3"))
	os.Symlink("/etc/passwd", filepath.Join(root, "opt/python3"))
	got := rootInterpreter(root, []string{"PATH=/opt:/usr/bin"})
	if got == nil || got.Path != "/usr/bin/python3.12" || got.Version != "3.12" {
		t.Fatalf("rootInterpreter = %+v, want /usr/bin/python3.12 3.12", got)
	}
	if got := rootInterpreter(root, []string{"PATH=/opt"}); got != nil {
		t.Fatalf("/opt/python3 -> the host's /etc/passwd was taken: %+v", got)
	}
}
