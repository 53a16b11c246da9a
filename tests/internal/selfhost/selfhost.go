// Package selfhost is the scaffolding of the test packages whose test
// binary hosts the sandbox's init (STYLE.md, practice 12): tests/handle
// and tests/pool. Main is their TestMain; BothUsers runs a scenario as
// root and, through setpriv and a copy of the test binary, as uid 65534.
package selfhost

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// Nobody is the unprivileged uid of the rootless runs.
const Nobody = 65534

// asChild marks the copy of the test binary that runs a scenario as
// Nobody, started by the root run through setpriv.
const asChild = "SBX_SELFHOST_TEST_CHILD"

// Main is the TestMain of a package whose sandboxes re-exec the test
// binary: that copy is the init (nsjail.IsInit), not a test run.
func Main(m *testing.M) {
	if nsjail.IsInit() {
		nsjail.Init()
	}
	os.Exit(m.Run())
}

// BothUsers runs scenario as root and, through a world-readable copy of
// this test binary started by setpriv, as uid 65534 (or only as the
// current user when that is not root). t is a top-level test: the copy
// runs ^t.Name()$ alone.
func BothUsers(t *testing.T, scenario func(t *testing.T)) {
	name := t.Name()
	if os.Getenv(asChild) == "1" || os.Geteuid() != 0 {
		t.Run(fmt.Sprintf("uid%d", os.Geteuid()), scenario)
		return
	}
	t.Run("root", scenario)
	t.Run("uid65534", func(t *testing.T) {
		// The test binary sits in a go-build directory only its owner
		// may enter: nobody runs a world-readable copy.
		self := filepath.Base(os.Args[0]) // handle.test, pool.test
		dir, err := os.MkdirTemp("", "sbx-"+strings.TrimSuffix(self, ".test")+"-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, self)
		if err := copyFile(bin, os.Args[0]); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", Nobody), fmt.Sprintf("--regid=%d", Nobody), "--clear-groups",
			bin, "-test.run", "^"+name+"$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), asChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("as uid %d:\n%s", Nobody, out)
		if err != nil {
			t.Fatalf("the scenario failed as uid %d: %v", Nobody, err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("skipped as uid %d", Nobody)
		}
		if !strings.Contains(string(out), "--- PASS: "+name+"/uid65534") {
			t.Fatalf("the scenario did not pass as uid %d", Nobody)
		}
	})
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
