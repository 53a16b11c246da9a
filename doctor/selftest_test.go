package doctor

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// Every attempt is complete data: a unique name, a payload that is
// embedded, a profile, a line saying what blocked means, and a judge.
func TestAttemptsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, a := range Attempts() {
		if a.Name == "" || seen[a.Name] || a.Blocked == "" || a.Judge == nil || (a.Profile != "standard" && a.Profile != "strict") {
			t.Errorf("attempt %+v: want a unique name, a built-in profile, a meaning and a judge", a)
		}
		seen[a.Name] = true
		if _, err := Payload(a.Payload); err != nil {
			t.Errorf("%s: payload %s: %v", a.Name, a.Payload, err)
		}
		used[a.Payload] = true
	}
	ents, _ := fs.ReadDir(payloads, "selftest")
	for _, e := range ents {
		if !used[e.Name()] {
			t.Errorf("selftest/%s is embedded but no attempt runs it", e.Name())
		}
	}
}

func okResult(stdout string) *nsjail.Result {
	return &nsjail.Result{Status: nsjail.StatusOK, Stdout: stdout}
}

// A deliberately broken attempt, one whose payload succeeds at what it
// tries (here a write to the workspace, which is allowed), must be
// reported NOT BLOCKED and fail the whole self-test: the judge can fail.
func TestBrokenAttemptIsNotBlocked(t *testing.T) {
	broken := Attempt{Name: "write the workspace", Payload: "rootfs.py", Profile: "standard",
		Blocked: "a write to /workspace fails (it never does: this attempt is broken on purpose)",
		Judge:   judgeAll(func(k, v string) bool { return refused(v) })}
	good := Attempts()[6] // read-only root
	if good.Name != "read-only root" {
		t.Fatalf("Attempts()[6] is %q", good.Name)
	}
	outcomes := map[string]*Outcome{
		broken.Name: {Result: okResult(`{"/workspace/x": "ok"}`), Out: map[string]any{"/workspace/x": "ok"}},
		good.Name:   {Result: okResult(`{"/usr/x": "EROFS"}`), Out: map[string]any{"/usr/x": "EROFS"}},
	}
	rep := SelfTest([]Attempt{good, broken}, func(a Attempt) *Outcome { return outcomes[a.Name] })
	if rep.OK || len(rep.Findings) != 2 {
		t.Fatalf("report ok %v with %d findings, want not ok", rep.OK, len(rep.Findings))
	}
	if f := rep.Findings[0]; !f.Blocked || f.Verdict != VerdictBlocked {
		t.Errorf("read-only root: %+v, want blocked", f)
	}
	if f := rep.Findings[1]; f.Blocked || f.Verdict != VerdictNotBlocked || !strings.Contains(f.Detail, "/workspace/x ok") {
		t.Errorf("broken attempt: %+v, want NOT BLOCKED naming what got through", f)
	}
}

// An attempt that could not run, or printed nothing, verified nothing:
// it is never blocked.
func TestNothingVerifiedIsNotBlocked(t *testing.T) {
	a := Attempts()[0]
	for name, o := range map[string]*Outcome{
		"error":       {Err: errors.New("no python3")},
		"setup error": {Result: &nsjail.Result{Status: nsjail.StatusSetupError, Message: "sbx init: pivot_root: EPERM"}},
		"no output":   {Result: &nsjail.Result{Status: nsjail.StatusExit, Stderr: "Traceback"}},
		"no python3":  {Result: &nsjail.Result{Status: nsjail.StatusNotFound, ExitCode: nsjail.ExitNotFound, Message: "python3: not found"}},
	} {
		f := Judge(a, o)
		if f.Blocked || (name != "no output") != (f.Verdict == VerdictError) {
			t.Errorf("%s: %+v, want not blocked (and an error when nothing ran)", name, f)
		}
	}
}

func TestJudges(t *testing.T) {
	sig := "SIGXCPU"
	denials := func(n int) []nsjail.Denial {
		d := make([]nsjail.Denial, n)
		for i := range d {
			d[i] = nsjail.Denial{Syscall: "x", Count: 1}
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		judge func(*Outcome) (bool, string)
		o     Outcome
		want  bool
	}{
		{"seccomp: filter refused", seccompJudge, Outcome{Result: &nsjail.Result{SeccompDenials: []nsjail.Denial{{Syscall: "bpf", Count: 1}}}, Out: map[string]any{"bpf": "EPERM"}}, true},
		{"seccomp: kernel refused, not the filter", seccompJudge, Outcome{Result: &nsjail.Result{SeccompDenials: []nsjail.Denial{}}, Out: map[string]any{"bpf": "EPERM"}}, false},
		{"seccomp: no filter at all", seccompJudge, Outcome{Result: &nsjail.Result{Layers: map[string]nsjail.Layer{"seccomp": {State: nsjail.LayerOff}}}, Out: map[string]any{"bpf": "EPERM"}}, false},
		{"seccomp: reached the kernel", seccompJudge, Outcome{Result: &nsjail.Result{}, Out: map[string]any{"bpf": "EFAULT"}}, false},
		{"fds: stdio only", fdsJudge, Outcome{Result: okResult(""), Out: []any{0.0, 1.0, 2.0}}, true},
		{"fds: a leak", fdsJudge, Outcome{Result: okResult(""), Out: []any{0.0, 1.0, 2.0, 3.0}}, false},
		{"status: a capability", statusJudge, Outcome{Result: okResult(""), Out: map[string]any{"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000400", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}}, false},
		{"sigxcpu: signal", sigxcpuJudge, Outcome{Result: &nsjail.Result{Status: nsjail.StatusSignal, Signal: &sig}}, true},
		{"sigxcpu: forged cpu_limit", sigxcpuJudge, Outcome{Result: &nsjail.Result{Status: nsjail.StatusCPULimit}}, false},
		{"denials: bounded", denialsJudge, Outcome{Result: &nsjail.Result{Status: nsjail.StatusOK, SeccompDenials: append(denials(256), nsjail.Denial{Syscall: "(other)", Count: 4744})}, Out: map[string]any{"calls": 5000.0, "refused": 5000.0}}, true},
		{"denials: unbounded", denialsJudge, Outcome{Result: &nsjail.Result{Status: nsjail.StatusOK, SeccompDenials: denials(5000)}, Out: map[string]any{"calls": 5000.0, "refused": 5000.0}}, false},
		{"denials: calls lost", denialsJudge, Outcome{Result: &nsjail.Result{Status: nsjail.StatusOK, SeccompDenials: denials(256)}, Out: map[string]any{"calls": 5000.0, "refused": 5000.0}}, false},
		{"connect: refused", connectJudge, Outcome{Result: okResult(""), Out: map[string]any{"connect": "ECONNREFUSED"}, Host: map[string]string{"listener": "no connection"}}, true},
		{"connect: host saw it", connectJudge, Outcome{Result: okResult(""), Out: map[string]any{"connect": "ETIMEDOUT"}, Host: map[string]string{"listener": "a connection from 127.0.0.1:5"}}, false},
		// The listener could not be asked (acceptedAny's error): not a pass.
		{"connect: listener not checked", connectJudge, Outcome{Result: okResult(""), Out: map[string]any{"connect": "ECONNREFUSED"}, Host: map[string]string{"listener": "not checked: accept4: bad file descriptor"}}, false},
		{"hardlinks: amplified", hardlinkJudge, Outcome{Result: okResult(""), Out: map[string]any{"logical_bytes": 1.0}, OutputBytes: 404 << 20}, false},
		{"hardlinks: once", hardlinkJudge, Outcome{Result: okResult(""), Out: map[string]any{"logical_bytes": 1.0}, OutputBytes: 4 << 20}, true},
		{"prlimit: set refused, get allowed", prlimitJudge, Outcome{Result: okResult(""), Out: map[string]any{"get": "ok", "set": "EPERM"}}, true},
		{"prlimit: set went through", prlimitJudge, Outcome{Result: okResult(""), Out: map[string]any{"get": "EPERM", "set": "ok"}}, false},
		{"inotify: host starved", inotifyJudge, Outcome{Result: okResult(""), Out: map[string]any{"held": 128.0}, Host: map[string]string{"inotify_init1": "EMFILE"}}, false},
	} {
		if got, why := tc.judge(&tc.o); got != tc.want {
			t.Errorf("%s: blocked %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}
