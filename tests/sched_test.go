//go:build integration

package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// schedProbe reports the payload's scheduling policy, nice value and the
// two rlimits that would let it raise them, then tries to take SCHED_FIFO
// and a lower nice value: "taken", or the errno.
const schedProbe = `import errno, json, os, resource
out = {"policy": os.sched_getscheduler(0), "nice": os.getpriority(os.PRIO_PROCESS, 0),
       "rtprio": resource.getrlimit(resource.RLIMIT_RTPRIO), "nice_limit": resource.getrlimit(resource.RLIMIT_NICE)}
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    out["fifo"] = "taken"
except OSError as e:
    out["fifo"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    os.setpriority(os.PRIO_PROCESS, 0, out["nice"] - 1)
    out["renice"] = "taken"
except OSError as e:
    out["renice"] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

// TestSandboxDropsRealtimeScheduling: a sandbox never runs with the
// real-time policy or the negative nice value of the sbx that started it,
// and its payload cannot take either, even when its caller's RLIMIT_RTPRIO
// and RLIMIT_NICE would allow it (nsjail.resetSchedOnFork, profiles'
// RLIMIT_RTPRIO and RLIMIT_NICE 0). Before: as root on cgroup v1 the run
// failed (a SCHED_FIFO init cannot join a cpu cgroup with no real-time
// runtime: EINVAL), and as 65534 the payload ran under SCHED_FIFO, out of
// reach of any CPU limit, and could take it back after being reniced.
func TestSandboxDropsRealtimeScheduling(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting sbx under SCHED_FIFO and nice -5 needs CAP_SYS_NICE: run the tests as root")
	}
	for _, tool := range []string{"chrt", "prlimit", "nice"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (util-linux, coreutils) is not installed: %v", tool, err)
		}
	}
	forEach(t, func(t *testing.T, r runner) {
		for _, c := range []struct {
			name string
			wrap []string
		}{
			{"fifo", []string{"chrt", "--fifo", "10"}},
			{"rr", []string{"chrt", "--rr", "5"}},
			{"nice", []string{"nice", "-n", "-5"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				inner := r.command("exec", "--json", "--profile", "standard", "-c", schedProbe)
				// The policy and the nice value are set before the drop
				// to 65534 (setpriv), which keeps both. (A caller's
				// RLIMIT_RTPRIO or RLIMIT_NICE above 0 cannot be set up
				// here: raising them needs CAP_SYS_RESOURCE, which this
				// host's root lacks; profiles' TestSpec holds the
				// sandbox's 0s, checked inside below.)
				argv := append(append([]string(nil), c.wrap[1:]...), inner.Path)
				argv = append(argv, inner.Args[1:]...)
				cmd := exec.Command(c.wrap[0], argv...)
				cmd.Env = append(os.Environ(), "SBX_TEST_LEAK_MARKER=leaked")
				var so, se bytes.Buffer
				cmd.Stdout, cmd.Stderr = &so, &se
				err := cmd.Run()
				var res nsjail.Result
				if jerr := json.Unmarshal(so.Bytes(), &res); jerr != nil {
					t.Fatalf("sbx under %v: %v, no Result (%v)\nstdout: %s\nstderr: %s", c.wrap, err, jerr, so.String(), se.String())
				}
				if res.Status != nsjail.StatusOK {
					t.Fatalf("sbx under %v: status %s (%s), want ok\nstderr: %s", c.wrap, res.Status, res.Message, se.String())
				}
				var got struct {
					Policy    int      `json:"policy"`
					Nice      int      `json:"nice"`
					RTPrio    []uint64 `json:"rtprio"`
					NiceLimit []uint64 `json:"nice_limit"`
					FIFO      string   `json:"fifo"`
					Renice    string   `json:"renice"`
				}
				if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
					t.Fatalf("payload output %q: %v (stderr %q)", res.Stdout, err, res.Stderr)
				}
				if got.Policy != 0 || got.Nice != 0 {
					t.Errorf("under %v the payload runs with policy %d and nice %d, want SCHED_OTHER (0) and nice 0", c.wrap, got.Policy, got.Nice)
				}
				if len(got.RTPrio) != 2 || got.RTPrio[0] != 0 || got.RTPrio[1] != 0 || len(got.NiceLimit) != 2 || got.NiceLimit[0] != 0 || got.NiceLimit[1] != 0 {
					t.Errorf("RLIMIT_RTPRIO %v and RLIMIT_NICE %v, want 0 and 0 (soft, hard)", got.RTPrio, got.NiceLimit)
				}
				if got.FIFO == "taken" || got.Renice == "taken" {
					t.Errorf("the payload raised its own priority: SCHED_FIFO %s, a lower nice value %s", got.FIFO, got.Renice)
				}
				if !strings.Contains(res.Layers["privileges"].Detail, "no real-time scheduling") {
					t.Errorf("layers.privileges = %q: says nothing of the scheduling", res.Layers["privileges"].Detail)
				}
			})
		}
	})
}
