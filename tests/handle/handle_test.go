//go:build integration

// Package handle tests the sandbox as a Go handle (nsjail.Start, Exec,
// Close). The test binary hosts the init (STYLE.md, practice 12), so the
// sandbox runs this very binary as its pid 1.
package handle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/tests/internal/selfhost"
)

func TestMain(m *testing.M) { selfhost.Main(m) }

// TestConfinedWhileWaiting is issue 12's acceptance: a started sandbox
// waits for its payload fully confined (every capability set empty,
// no_new_privs, a seccomp filter), and the payload it is then given runs
// and reports as a cold run would. As root, and as uid 65534.
func TestConfinedWhileWaiting(t *testing.T) {
	selfhost.BothUsers(t, confinedWhileWaiting)
}

// job is the strict profile's run, as sbx exec builds it.
func job(t *testing.T) *nsjail.Job {
	t.Helper()
	prof, err := profiles.Load("strict")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := prof.Spec(fmt.Sprintf("handle%d", time.Now().UnixNano()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &nsjail.Job{
		Spec:        spec,
		OutputLimit: int64(prof.Limits.Output),
		Timeout:     time.Duration(prof.Limits.WallTime),
		Limits: nsjail.Limits{
			MemoryBytes: int64(prof.Limits.Memory),
			Pids:        prof.Limits.Pids,
			CPUs:        prof.Limits.CPUs,
			CPUTime:     time.Duration(prof.Limits.CPUTime),
		},
	}
}

// confinedFields are the /proc/PID/status lines (proc(5)) of a confined
// init, as they must read while it waits.
var confinedFields = map[string]string{
	"CapInh":     "0000000000000000",
	"CapPrm":     "0000000000000000",
	"CapEff":     "0000000000000000",
	"CapBnd":     "0000000000000000",
	"CapAmb":     "0000000000000000",
	"NoNewPrivs": "1",
	"Seccomp":    "2", // SECCOMP_MODE_FILTER
}

func procStatus(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

func confinedWhileWaiting(t *testing.T) {
	ctx := context.Background()
	sb, err := nsjail.Start(ctx, job(t))
	if err != nil {
		if os.Getenv("SBX_MUST_WORK") != "1" && strings.Contains(err.Error(), "user namespace") {
			t.Skipf("no sandbox as uid %d here: %v", os.Geteuid(), err)
		}
		t.Fatalf("Start: %v", err)
	}
	defer sb.Close()
	if ph := sb.Phase(); ph != nsjail.PhaseReady {
		t.Fatalf("after Start: phase %v, want ready", ph)
	}
	// The wait a warm sandbox makes: nothing may loosen meanwhile.
	time.Sleep(2 * time.Second)
	st, err := procStatus(sb.InitPid())
	if err != nil {
		t.Fatalf("the waiting init's status: %v", err)
	}
	for k, want := range confinedFields {
		if st[k] != want {
			t.Errorf("waiting init (pid %d): %s %q, want %q", sb.InitPid(), k, st[k], want)
		}
	}
	if ph := sb.Phase(); ph != nsjail.PhaseReady {
		t.Fatalf("after the wait: phase %v, want ready", ph)
	}

	// The output directory and the timings are the execution's, given at
	// Exec to a sandbox started without them (as the pool starts them).
	var live, timings strings.Builder
	outDir := t.TempDir()
	res, err := sb.Exec(ctx, nsjail.Payload{Argv: []string{"/usr/bin/python3", "-c", "import sys; open('out.txt', 'w').write('x'); print('hello', sys.argv[1])", "handle"}},
		nsjail.IO{Stdout: &live, OutputDir: outDir, Timings: &timings})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "out.txt")); err != nil || string(b) != "x" {
		t.Errorf("IO.OutputDir: out.txt %q, %v; want the file the payload wrote", b, err)
	}
	for _, step := range []string{"sbx: Exec", "sbx: result ready"} {
		if !strings.Contains(timings.String(), step) {
			t.Errorf("IO.Timings lacks %q:\n%s", step, timings.String())
		}
	}
	// As a cold run reports it (sbx exec --profile strict -c ...).
	if res.Status != nsjail.StatusOK || res.ExitCode != 0 || res.Signal != nil || res.Stdout != "hello handle\n" || res.Stderr != "" {
		t.Fatalf("Result: status %s exit %d signal %v stdout %q stderr %q message %q; want ok, 0, \"hello handle\\n\"",
			res.Status, res.ExitCode, res.Signal, res.Stdout, res.Stderr, res.Message)
	}
	if live.String() != res.Stdout {
		t.Errorf("live stdout %q, Result's %q", live.String(), res.Stdout)
	}
	if len(res.SeccompDenials) != 0 {
		t.Errorf("denials %v: the init's own calls under the filter must not count", res.SeccompDenials)
	}
	if res.Layers["seccomp"].State != "on" || res.Layers["privileges"].State != "on" {
		t.Errorf("layers %+v: seccomp and privileges must be on", res.Layers)
	}
	if res.Usage.WallMS >= 2000 {
		t.Errorf("wall_ms %d: the Result's clock starts at Exec, not Start", res.Usage.WallMS)
	}
	if _, err := sb.Exec(ctx, nsjail.Payload{Argv: []string{"/bin/true"}}, nsjail.IO{}); !errors.Is(err, nsjail.ErrUsed) && !errors.Is(err, nsjail.ErrClosed) {
		t.Errorf("a second Exec: %v, want ErrUsed or ErrClosed", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if ph := sb.Phase(); ph != nsjail.PhaseClosed {
		t.Errorf("after Close: phase %v, want closed", ph)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", sb.InitPid())); err == nil {
		t.Errorf("the init (pid %d) outlived Close", sb.InitPid())
	}
}

// TestCloseWithoutExec: a sandbox that never got its payload is killed
// and destroyed by Close, and cannot be given one afterwards.
func TestCloseWithoutExec(t *testing.T) {
	sb, err := nsjail.Start(context.Background(), job(t))
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	pid := sb.InitPid()
	done := make(chan error, 1)
	go func() { done <- sb.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close of a waiting sandbox did not return")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("the init (pid %d) outlived Close", pid)
	}
	if _, err := sb.Exec(context.Background(), nsjail.Payload{Argv: []string{"/bin/true"}}, nsjail.IO{}); !errors.Is(err, nsjail.ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

// TestCloseDuringExec: Close kills a running payload, and the Exec in
// flight returns at once with a Result that says the run was ended.
func TestCloseDuringExec(t *testing.T) {
	sb, err := nsjail.Start(context.Background(), job(t))
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	type ret struct {
		res *nsjail.Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := sb.Exec(context.Background(), nsjail.Payload{Argv: []string{"/bin/sleep", "600"}}, nsjail.IO{})
		done <- ret{res, err}
	}()
	for i := 0; sb.Phase() != nsjail.PhaseRunning && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Exec: %v", r.err)
		}
		if r.res.Status != nsjail.StatusCanceled || !strings.Contains(r.res.Message, "closed") {
			t.Errorf("Result: status %s, message %q; want canceled naming the Close (the caller ended it)", r.res.Status, r.res.Message)
		}
	case <-time.After(time.Minute):
		t.Fatal("Exec did not return after Close")
	}
	if ph := sb.Phase(); ph != nsjail.PhaseClosed {
		t.Errorf("after Close: phase %v, want closed", ph)
	}
}
