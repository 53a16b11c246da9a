//go:build integration

package tests

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Compatibility under strict (issue 11): CPython's own regression tests
// pass inside `sbx exec --profile strict` with raised limits, as root and
// as uid 65534. CI runs the subset marked ci in tests/cpython/modules.txt
// (test_pty, test_os, test_pickle, test_resource, parts of test_asyncio,
// ...); `tests/cpython/run.sh` runs all 50 modules (docs/compat.md).
func TestCPythonRegressionUnderStrict(t *testing.T) {
	script := filepath.Join(repoDir, "tests", "cpython", "run.sh")
	if err := exec.Command("/usr/bin/python3", "-c", "import test.libregrtest, test.test_pty").Run(); err != nil {
		// Not a kernel feature: a missing package is a broken test host.
		t.Fatalf("CPython's test package is missing (%v): apt-get install libpython3.11-testsuite", err)
	}
	forEach(t, func(t *testing.T, r runner) {
		cmd := exec.Command("bash", script, "--set", "ci", "--sbx", sbxBin, "--as", fmt.Sprint(r.uid))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err != nil || !strings.Contains(out.String(), "Tests result: SUCCESS") || !strings.Contains(out.String(), "cpython: 1 passed, 0 failed") {
			t.Fatalf("tests/cpython/run.sh --set ci as uid %d: %v\n%s", r.uid, err, out.String())
		}
		t.Logf("%s", lastLines(out.String(), 4))
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
