//go:build integration

package tests

import (
	"strings"
	"testing"
)

// TestInitClonedWithoutFullFork: the init is cloned by sbx_spawn
// (nsjail/spawn_linux.c: CLONE_VM, no copy of the supervisor's page
// tables), not by os/exec's full fork, both as root (on cgroup v1 or with
// no cgroup; v2's CLONE_INTO_CGROUP keeps os/exec) and as uid 65534. The
// timeline's step is named by the path that ran; the run must still
// succeed with the init's usual ids.
func TestInitClonedWithoutFullFork(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		if r.uid == 0 && hostCgroupMode(t) == "cgroup2" {
			t.Skip("cgroup v2: the init is born in its cgroup through clone3 CLONE_INTO_CGROUP, which os/exec does")
		}
		out := r.exec(t, "", "exec", "--debug-timings", "-c", "import os; print(os.getuid(), os.getgid())")
		if out.code != 0 {
			t.Fatalf("exit %d: %s", out.code, out.stderr)
		}
		var clone []string
		for _, s := range timelineSteps(out.stderr) {
			if strings.HasPrefix(s, "sbx: clone+exec init") {
				clone = append(clone, s)
			}
		}
		if want := "sbx: clone+exec init (clone CLONE_VM, no full fork)"; len(clone) != 1 || clone[0] != want {
			t.Errorf("the init's clone steps are %q, want [%q]:\n%s", clone, want, out.stderr)
		}
	})
}
