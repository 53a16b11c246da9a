//go:build integration

package tests

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// hostCgroupMode is what a cgroup-capable runner must get here: cgroup2 on
// a pure v2 host, cgroup1 on a hybrid one.
func hostCgroupMode(t *testing.T) string {
	if m := os.Getenv("SBX_TEST_CGROUP"); m != "" {
		return m
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "cgroup2"
	}
	return "cgroup1"
}

func TestDoctorTellsTheTruth(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "doctor", "--json")
		var rep struct {
			OK     bool `json:"ok"`
			UID    int  `json:"uid"`
			Cgroup struct {
				Mode        string   `json:"mode"`
				Controllers []string `json:"controllers"`
			} `json:"cgroup"`
			Checks []struct {
				Name, Status, Detail, Fix string
			} `json:"checks"`
			Python *struct {
				Version string `json:"version"`
			} `json:"python"`
		}
		if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out.stdout, out.stderr)
		}
		if out.code != 0 || !rep.OK || rep.UID != r.uid {
			t.Errorf("doctor: exit %d ok %v uid %d: %s", out.code, rep.OK, rep.UID, out.stdout)
		}
		delegated := r.uid == 0 || os.Getenv("SBX_TEST_DELEGATED") == "1"
		want := "none"
		if delegated {
			want = hostCgroupMode(t)
		}
		if rep.Cgroup.Mode != want {
			t.Errorf("cgroup mode %q, want %q", rep.Cgroup.Mode, want)
		}
		have := strings.Join(rep.Cgroup.Controllers, " ")
		for _, c := range []string{"memory", "pids", "cpu"} {
			if delegated != strings.Contains(" "+have+" ", " "+c+" ") {
				t.Errorf("controllers %q: %s usable %v, want %v", have, c, !delegated, delegated)
			}
		}
		for _, c := range rep.Checks {
			if c.Name == "cgroup" && (c.Status == "warn") == delegated {
				t.Errorf("cgroup check %s: %s", c.Status, c.Detail)
			}
			if c.Status == "fail" {
				t.Errorf("%s failed: %s (%s)", c.Name, c.Detail, c.Fix)
			}
		}
		if rep.Python == nil || !strings.HasPrefix(rep.Python.Version, "3.") {
			t.Errorf("python: %+v", rep.Python)
		}
	})
}

func TestRequireCgroup(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--require", "cgroup", "-c", "print('ran')")
		delegated := r.uid == 0 || os.Getenv("SBX_TEST_DELEGATED") == "1"
		if delegated {
			if out.code != 0 || out.stdout != "ran\n" {
				t.Errorf("--require cgroup with a cgroup: exit %d %q %q", out.code, out.stdout, out.stderr)
			}
			return
		}
		lines := strings.Split(strings.TrimSpace(out.stderr), "\n")
		if out.code != nsjail.ExitSbxFailed || out.stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], "requires a cgroup") || !strings.Contains(lines[0], "doctor") {
			t.Errorf("--require cgroup without one: exit %d stdout %q stderr %q; want 125 and one line naming the layer and the fix", out.code, out.stdout, out.stderr)
		}
	})
}

func TestRequireSeccomp(t *testing.T) {
	r := runners()[0]
	out := r.exec(t, "", "exec", "--profile", data("profiles/no-seccomp.toml"), "--require", "seccomp", "-c", "print('ran')")
	if out.code != nsjail.ExitSbxFailed || out.stdout != "" || !strings.Contains(out.stderr, `seccomp.policy is "none"`) {
		t.Errorf("--require seccomp with policy none: exit %d %q %q", out.code, out.stdout, out.stderr)
	}
}

func TestLayersAndDegradedWarning(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		res, _ := r.result(t, "-c", "pass")
		for _, k := range []string{"namespaces", "identity", "privileges", "filesystem", "network", "seccomp", "cgroup"} {
			if res.Layers[k].State == "" || res.Layers[k].Detail == "" {
				t.Errorf("layers.%s = %+v", k, res.Layers[k])
			}
		}
		delegated := r.uid == 0 || os.Getenv("SBX_TEST_DELEGATED") == "1"
		if got := res.Layers["cgroup"].State; (got == nsjail.LayerOn) != delegated {
			t.Errorf("layers.cgroup %+v, delegated %v", res.Layers["cgroup"], delegated)
		}
		out := r.exec(t, "", "exec", "-c", "print('hi')")
		warnings := strings.Count(out.stderr, "sbx: warning:")
		if out.stdout != "hi\n" || (warnings == 1) == delegated || warnings > 1 {
			t.Errorf("terminal run: stdout %q stderr %q; want one warning line exactly when degraded", out.stdout, out.stderr)
		}
	})
}
