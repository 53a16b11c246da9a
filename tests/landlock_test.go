//go:build integration

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// requireLandlock skips when the kernel has no usable Landlock (ABI 2, Linux
// 5.19); SBX_MUST_WORK=1 turns the skip into a failure.
func requireLandlock(t *testing.T) int {
	t.Helper()
	abi := nsjail.LandlockABI()
	if abi < 2 {
		msg := fmt.Sprintf("the kernel has no usable Landlock (ABI %d; want 2, Linux 5.19, with landlock in lsm=)", abi)
		if os.Getenv("SBX_MUST_WORK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return abi
}

// Landlock refuses writes that the mounts allow: /proc/self/comm and
// /proc/self/oom_score_adj are writable in the sandbox's procfs (the run
// with landlock.mode off shows it), and only the Landlock layer stops
// them. Everything a payload needs still works under it, and the init's
// workspace report, which runs under the same ruleset, still sees the
// file the payload wrote.
func TestLandlockRefusesWritesTheMountsAllow(t *testing.T) {
	requireLandlock(t)
	forEach(t, func(t *testing.T, r runner) {
		var on, off map[string]string
		res := r.okResult(t, &on, "--profile", "strict", data("landlock_probe.py"))
		r.okResult(t, &off, "--profile", data("profiles/no-landlock.toml"), data("landlock_probe.py"))
		for _, k := range []string{"workspace", "tmp", "shm", "devnull", "rename", "loopback"} {
			if on[k] != "ok" || off[k] != "ok" {
				t.Errorf("%s: %q with Landlock, %q without; want ok", k, on[k], off[k])
			}
		}
		for _, k := range []string{"proc_comm", "proc_oom_score_adj"} {
			if on[k] != "EACCES" || off[k] != "ok" {
				t.Errorf("%s: %q with Landlock, %q without; want EACCES (Landlock) and ok (the mount allows it)", k, on[k], off[k])
			}
		}
		if on["rootfs"] != "EROFS" {
			t.Errorf("rootfs write: %q, want EROFS", on["rootfs"])
		}
		var paths []string
		for _, f := range res.Files {
			paths = append(paths, f.Path)
		}
		if got := strings.Join(paths, " "); !strings.Contains(" "+got+" ", " out.txt ") {
			t.Errorf("files %q: the workspace report lost out.txt under Landlock", got)
		}
	})
}

// The Result's layers name Landlock with the kernel's ABI, as root and
// unprivileged, and say so when the profile turns it off.
func TestLandlockLayer(t *testing.T) {
	abi := requireLandlock(t)
	forEach(t, func(t *testing.T, r runner) {
		res := r.okResult(t, nil, "-c", "pass")
		l := res.Layers["landlock"]
		if l.State != nsjail.LayerOn || l.ABI != abi || !strings.Contains(l.Detail, fmt.Sprintf("ABI %d: ", abi)) || !strings.Contains(l.Detail, " /tmp /workspace ") {
			t.Errorf("layers.landlock = %+v, want on with ABI %d", l, abi)
		}
		res = r.okResult(t, nil, "--profile", data("profiles/no-landlock.toml"), "-c", "pass")
		if l := res.Layers["landlock"]; l.State != nsjail.LayerOff {
			t.Errorf("landlock.mode off: layers.landlock = %+v, want off", l)
		}
	})
}

// --require landlock runs where the kernel has it, and refuses a profile
// that turns it off with exit 125 and one line naming the key and the fix.
func TestRequireLandlock(t *testing.T) {
	requireLandlock(t)
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--require", "landlock", "-c", "print('ran')")
		if out.code != 0 || out.stdout != "ran\n" {
			t.Errorf("--require landlock: exit %d %q %q", out.code, out.stdout, out.stderr)
		}
		out = r.exec(t, "", "exec", "--profile", data("profiles/no-landlock.toml"), "--require", "landlock", "-c", "print('ran')")
		lines := strings.Split(strings.TrimSpace(out.stderr), "\n")
		if out.code != nsjail.ExitSbxFailed || out.stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], `requires landlock, but landlock.mode is "off"`) || !strings.Contains(lines[0], `set it to "on"`) {
			t.Errorf("--require landlock with mode off: exit %d stdout %q stderr %q; want 125 and one line naming the layer and the fix", out.code, out.stdout, out.stderr)
		}
	})
}

// sbx doctor checks Landlock (no longer an INFO line): OK with the ABI the
// runs get, as root and unprivileged.
func TestDoctorLandlockCheck(t *testing.T) {
	abi := requireLandlock(t)
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "doctor", "--json")
		var rep struct {
			Checks []struct{ Name, Status, Detail string } `json:"checks"`
		}
		if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, out.stdout)
		}
		for _, c := range rep.Checks {
			if c.Name == "Landlock" {
				if c.Status != "ok" || !strings.HasPrefix(c.Detail, fmt.Sprintf("ABI %d: ", abi)) {
					t.Errorf("Landlock check %s %q, want ok with ABI %d", c.Status, c.Detail, abi)
				}
				return
			}
		}
		t.Errorf("no Landlock check in %s", out.stdout)
	})
}
