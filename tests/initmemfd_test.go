//go:build integration

package tests

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitMemfdHoldsTheEmbeddedImage: the sealed sbx-init memfd that a
// running sbx execs every init from holds exactly the sbx-init image
// embedded in that sbx, byte for byte, when it was filled by the sendfile
// from /proc/self/exe at the image's ELF offset (internal/initbin
// selfcopy.go). That copy's own check compares only the first and last
// page (selfCopyCheck), so a wrong offset or length that kept both ends,
// or bytes of the file that are not the image, would go unseen there; this
// compares all of them. The memfd is read through /proc/<sbx>/fd/N by the
// test (root), while a payload holds the sandbox.
func TestInitMemfdHoldsTheEmbeddedImage(t *testing.T) {
	self, err := os.ReadFile(sbxBin)
	if err != nil {
		t.Fatal(err)
	}
	var built []byte
	if os.Getenv("SBX_BIN") == "" {
		// The harness built sbxBin with make, which embedded this file.
		if built, err = os.ReadFile(filepath.Join(repoDir, "internal", "initbin", "sbx-init.bin")); err != nil {
			t.Fatal(err)
		}
	}
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--debug-timings", "--", "/bin/true")
		if !strings.Contains(out.stderr, "sbx-init memfd sealed (sendfile from /proc/self/exe") {
			t.Fatalf("--debug-timings does not show the memfd filled by sendfile from /proc/self/exe:\n%s", out.stderr)
		}
		cmd, stdout, se := startHeld(t, r, "--", "/usr/bin/python3", "-S", "-c", "import time; print('up', flush=True); time.sleep(60)")
		if line, err := stdout.ReadString('\n'); err != nil || line != "up\n" {
			t.Fatalf("payload: %q %v; sbx stderr %s", line, err, se.String())
		}
		sbxPid := sbxProcess(t, cmd.Process.Pid)
		fd := memfdOf(t, sbxPid)
		if fd == "" {
			t.Fatalf("sbx (pid %d) holds no fd of /memfd:sbx-init", sbxPid)
		}
		got, err := os.ReadFile(fd)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 1<<20 || !bytes.HasPrefix(got, []byte("\x7fELF")) {
			t.Fatalf("%s: %d bytes, not an ELF image of sbx-init", fd, len(got))
		}
		if built != nil {
			if g, w := sha256.Sum256(got), sha256.Sum256(built); g != w {
				t.Fatalf("%s (%d bytes, sha256 %x) is not the embedded sbx-init.bin (%d bytes, sha256 %x)", fd, len(got), g, len(built), w)
			}
		}
		if !bytes.Contains(self, got) {
			t.Fatalf("%s (%d bytes) is found nowhere in %s: not the image it embeds", fd, len(got), sbxBin)
		}
	})
}
