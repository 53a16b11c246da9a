//go:build !sbx_lean

package engine

import (
	"os"
	"path/filepath"
	"strings"
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

// TestBuildImageNotStored: Build resolves the profile's image before the
// Spec: a bare name the store lacks is an error that says so (never
// pulled), a tagged one whose registry cannot be reached says both, and
// neither leaves a Config (nor a lock) behind. Close is safe without an
// image and twice.
func TestBuildImageNotStored(t *testing.T) {
	t.Setenv("SBX_HOME", t.TempDir())
	for _, tc := range []struct{ image, want, notWant string }{
		{"never-imported", "not in the store", "pulling"},
		{DataImage, "'make image-data' builds it", "pulling"},
		// Port 1 on loopback: refused at once, nothing leaves the host.
		{"127.0.0.1:1/t/x:v1", "pulling it failed", ""},
	} {
		c, err := Build("id1", Request{Profile: "strict", Flags: func(name string) ([]string, bool) {
			if name == "image" {
				return []string{tc.image}, true
			}
			return nil, false
		}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.notWant != "" && strings.Contains(err.Error(), tc.notWant)) {
			t.Errorf("image %q: err = %v, want one saying %q", tc.image, err, tc.want)
		}
		if c != nil {
			t.Errorf("image %q: a Config came with the error", tc.image)
		}
	}
	c, err := Build("id1", Request{Profile: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Image != nil || c.ImageArgv() != nil || c.Close() != nil || c.Close() != nil {
		t.Errorf("a Config without an image: Image %+v", c.Image)
	}
}
