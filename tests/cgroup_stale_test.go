//go:build integration

package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// groupDirs are the directories of the cgroup a sandbox's init is in (one
// per v1 hierarchy sbx uses, or the v2 one), from the init's
// /proc/PID/cgroup.
func groupDirs(t *testing.T, sg sandboxGroup) []string {
	t.Helper()
	if hostCgroupMode(t) == "cgroup2" {
		return []string{filepath.Join("/sys/fs/cgroup", sg.paths[""])}
	}
	var out []string
	for _, c := range v1Used {
		p := sg.paths[c]
		if !strings.Contains(p, "/sbx-") {
			t.Fatalf("the init (pid %d) is in cgroup1 %s:%s, not a sandbox's sbx-* group", sg.init, c, p)
		}
		out = append(out, v1Dir(t, c, p))
	}
	return out
}

// TestStaleGroupOfKilledSbxRemovedByNextRun: an sbx that is SIGKILLed
// cannot remove its sandbox's cgroup; its init and payload die with it
// (Pdeathsig, the pid namespace), and the empty group is left behind,
// unlocked. The next sbx that makes a cgroup removes it (CleanupStale), in
// every hierarchy. This is the guarantee that a crashed sbx leaves nothing
// for long, which CleanupStale's cheaper scan (issue 13: one getdents64 per
// hierarchy, this process's own groups skipped without a lock) must keep.
func TestStaleGroupOfKilledSbxRemovedByNextRun(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		res, out := r.result(t, "--pids", "64", "-c", "pass")
		if res.Status != nsjail.StatusOK {
			t.Fatalf("probe run: %s (%s): %s", res.Status, res.Message, out.stderr)
		}
		if by := res.Limits["pids"].EnforcedBy; by != nsjail.ByCgroup1 && by != nsjail.ByCgroup2 {
			if r.uid == 0 {
				t.Fatalf("root: limits.pids enforced by %q, want a cgroup", by)
			}
			t.Skipf("uid %d gets no cgroup here (limits.pids enforced by %q: no delegated subtree), so no group can be left behind", r.uid, by)
		}
		m := marker(t)
		defer killMarked(m)
		h, sg := holdV1Sandbox(t, r, m)
		dirs := groupDirs(t, sg)
		t.Cleanup(func() {
			for _, d := range dirs {
				syscall.Rmdir(d) // if the test failed: nothing else removes them
			}
		})
		if err := syscall.Kill(sg.sbx, syscall.SIGKILL); err != nil {
			h.stop()
			t.Fatalf("kill sbx %d: %v", sg.sbx, err)
		}
		h.cmd.Wait()
		// The init and payload die with sbx; until they are gone the
		// group is busy and no cleanup could remove it.
		deadline := time.Now().Add(30 * time.Second)
		for {
			busy := ""
			for _, d := range dirs {
				if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
					busy = fmt.Sprintf("%s holds %s", d, strings.Fields(string(b)))
				}
			}
			if busy == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("30 s after sbx %d was killed: %s", sg.sbx, busy)
			}
			time.Sleep(10 * time.Millisecond)
		}
		left := 0
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left++
			}
		}
		// Another sbx running on this host at the same time may remove
		// them first; that is the same guarantee at work.
		t.Logf("sbx %d killed: %d of its %d group directories left behind (%s)", sg.sbx, left, len(dirs), strings.Join(dirs, ", "))
		// The next run: CleanupStale runs once its payload has started, so
		// the payload gives it time to finish before sbx exits.
		res, out = r.result(t, "--pids", "64", "-c", "import time; time.sleep(0.3)")
		if res.Status != nsjail.StatusOK {
			t.Fatalf("next run: %s (%s): %s", res.Status, res.Message, out.stderr)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s of the SIGKILLed sbx %d is still there after the next run (stat: %v)", d, sg.sbx, err)
			}
		}
	})
}

// TestStaleFrozenGroupThawedByNextRun: an sbx that dies inside its v1
// kill (cgroup.killV1: freeze, SIGKILL each pid, thaw), between the
// freeze and the thaw, leaves its sandbox frozen: a frozen task never
// runs, so neither the SIGKILLs nor Pdeathsig end it, and the group
// stays busy forever. The test freezes a held sandbox's freezer group as
// killV1 does and SIGKILLs its sbx; the next run's CleanupStale must
// kill and thaw it, so that no process of it is left, and remove the
// group in every hierarchy. Before, the init and payload stayed in state
// D for good (found when a dry run of CI was stopped by SIGTERM while a
// server killed a session). cgroup v1 only: v2's freezer lets a fatal
// signal through (killV2).
func TestStaleFrozenGroupThawedByNextRun(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		requireV1Group(t, r)
		m := marker(t)
		defer killMarked(m)
		h, sg := holdV1Sandbox(t, r, m)
		dirs := groupDirs(t, sg)
		freezer := v1Dir(t, "freezer", sg.paths["freezer"])
		state := filepath.Join(freezer, "freezer.state")
		t.Cleanup(func() {
			// If the test failed: nothing else would ever end them.
			os.WriteFile(state, []byte("THAWED"), 0)
			killMarked(m)
			syscall.Kill(sg.init, syscall.SIGKILL)
			time.Sleep(100 * time.Millisecond)
			for _, d := range dirs {
				syscall.Rmdir(d)
			}
		})
		if err := os.WriteFile(state, []byte("FROZEN"), 0); err != nil {
			h.stop()
			t.Fatalf("freeze %s: %v", freezer, err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			b, _ := os.ReadFile(state)
			if string(b) == "FROZEN\n" {
				break
			}
			if time.Now().After(deadline) {
				h.stop()
				t.Fatalf("%s never froze: %q", freezer, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := syscall.Kill(sg.sbx, syscall.SIGKILL); err != nil {
			h.stop()
			t.Fatalf("kill sbx %d: %v", sg.sbx, err)
		}
		h.cmd.Wait()
		// Frozen, the init takes no Pdeathsig: it is still there.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", sg.init)); err != nil {
			t.Fatalf("the frozen init %d is gone after its sbx was killed (%v): the test froze nothing", sg.init, err)
		}
		// The next run: its CleanupStale runs once its payload has
		// started; the payload outlasts the thaw's wait.
		res, out := r.result(t, "--pids", "64", "-c", "import time; time.sleep(2)")
		if res.Status != nsjail.StatusOK {
			t.Fatalf("next run: %s (%s): %s", res.Status, res.Message, out.stderr)
		}
		b, _ := os.ReadFile(state)
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", sg.init))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("30 s after the next run, the frozen sandbox's init %d is still there (freezer.state %q)", sg.init, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s of the frozen sandbox is still there after the next run (stat: %v)", d, err)
			}
		}
	})
}
