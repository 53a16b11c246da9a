//go:build integration

package tests

import (
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestInitClonedWithoutFullFork: the init is cloned by sbx_spawn
// (nsjail/spawn_linux.c: CLONE_VM, no copy of the supervisor's page
// tables), not by os/exec's full fork, as root and as uid 65534, with a
// cgroup or without. With a v2 cgroup (root on a pure v2 host, or a
// delegated subtree: make vmtest) it is clone3 CLONE_INTO_CGROUP, and the
// init is born in its cgroup: no attach after the clone. The timeline's
// step is named by the path that ran; the run must still succeed.
func TestInitClonedWithoutFullFork(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		// --pids: a limit, so a cgroup where the runner may have one.
		res, out := r.result(t, "--pids", "64", "--debug-timings", "-c", "import os; print(os.getuid(), os.getgid())")
		if out.code != 0 || res.Status != nsjail.StatusOK {
			t.Fatalf("exit %d, status %s: %s", out.code, res.Status, out.stderr)
		}
		by := res.Limits["pids"].EnforcedBy
		want := "sbx: clone+exec init (clone CLONE_VM, no full fork)"
		if by == nsjail.ByCgroup2 {
			want = "sbx: clone+exec init (clone3 CLONE_VM|CLONE_INTO_CGROUP, no full fork)"
		}
		var clone []string
		steps := timelineSteps(out.stderr)
		for _, s := range steps {
			if strings.HasPrefix(s, "sbx: clone+exec init") {
				clone = append(clone, s)
			}
			if by == nsjail.ByCgroup2 && strings.HasPrefix(s, "sbx: init attached to its cgroup") {
				t.Errorf("limits.pids by %s, but the init was attached after its clone:\n%s", by, out.stderr)
			}
		}
		if len(clone) != 1 || clone[0] != want {
			t.Errorf("limits.pids by %q; the init's clone steps are %q, want [%q]:\n%s", by, clone, want, out.stderr)
		}
		t.Logf("limits.pids by %q: %s", by, want)
	})
}
