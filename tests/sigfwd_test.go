//go:build integration

package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestSignalBeforeTheSandboxEndsSbx: sbx exec registers the signals it
// forwards from a package init, before the CLI (internal/sigfwd, issue
// 13), but until the run takes them a caught one does what it did
// unregistered: sbx dies of it. So Ctrl-C (or a SIGTERM, or a hang-up)
// still ends an sbx waiting for its script on stdin, instead of being
// held for a payload that does not exist yet; and leaves nothing behind:
// the script's host copy (in sbx's TMPDIR, here a directory of the
// test's own) has no name to leave.
func TestSignalBeforeTheSandboxEndsSbx(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		// Not t.TempDir, whose parent only root may search.
		tmp, err := os.MkdirTemp("", "sbx-sigfwd-tmpdir-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		if err := os.Chmod(tmp, 0o777); err != nil { // the runner's uid writes there
			t.Fatal(err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			cmd := r.command("exec", "-")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stdin, err := cmd.StdinPipe() // never written: sbx waits for the script
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// As root the registration runs beside the inits and the CLI
			// and is done or nearly so by the read; as 65534 it is made
			// in line, later: either way the signal must end sbx.
			waitReading(t, cmd.Process.Pid) // setpriv execs sbx in place
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if signal.Ignored(sig) {
				// sbx inherited sig ignored from this test (a run under
				// nohup ignores SIGHUP): as before Notify, it must drop it
				// and go on with the (empty) script it reads.
				select {
				case err = <-done:
					t.Errorf("%v, started ignored, to sbx waiting for its script: it ended (%v, stderr %q); want it dropped", sig, err, stderr.String())
					continue
				case <-time.After(time.Second):
				}
				stdin.Close()
				if err := <-done; err != nil {
					t.Errorf("%v, started ignored, then an empty script: %v, stderr %q; want exit 0", sig, err, stderr.String())
				}
				continue
			}
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("%v to sbx waiting for its script: still running 20 s later; want it to end as before Notify", sig)
			}
			stdin.Close()
			if !diedOf(err, sig) {
				t.Errorf("%v to sbx waiting for its script: %v, stderr %q; want it killed by the signal", sig, err, stderr.String())
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("%v to sbx waiting for its script: it left %s in its TMPDIR", sig, left[0].Name())
				for _, e := range left {
					os.Remove(filepath.Join(tmp, e.Name()))
				}
			}
		}
	})
}

// TestEarlySIGTERMLeavesNothing: a SIGTERM sent at any moment after sbx
// exec starts either kills it before it made anything (it dies of the
// signal, as before its registration) or reaches the payload (status
// signal, exit 143): never a sandbox left behind, a hang, or a setup
// error. The delays sweep the start, from the package inits to the
// payload's run; the test asserts outcomes, never a time.
func TestEarlySIGTERMLeavesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		m := marker(t)
		defer killMarked(m)
		died, forwarded := 0, 0
		for i := 0; i < 60; i++ {
			delay := time.Duration(i%30) * 500 * time.Microsecond
			if i >= 30 {
				delay = time.Duration(i-30) * 2 * time.Millisecond
			}
			before := sbxCgroups()
			cmd := r.command("exec", "--json", "--", "/usr/bin/python3", "-S", "-c", "import time; time.sleep(60)", m)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay)
			// setpriv execs sbx in place: its pid is sbx's.
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("SIGTERM after %v: sbx still running 30 s later", delay)
			}
			if diedOf(err, syscall.SIGTERM) {
				died++
				// Nothing was made: no init, no payload, no cgroup.
				nothingLeft(t, cmd.Process.Pid, m, noRunID)
				if left := newEmptyCgroups(before); len(left) > 0 {
					t.Fatalf("SIGTERM after %v killed sbx and left cgroups %v", delay, left)
				}
				continue
			}
			var res nsjail.Result
			if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
				t.Fatalf("SIGTERM after %v: %v, no Result (%v), stderr %q", delay, err, jerr, stderr.String())
			}
			if res.Status != nsjail.StatusSignal || res.ExitCode != 128+int(syscall.SIGTERM) {
				t.Fatalf("SIGTERM after %v: status %s exit %d (%s); want the signal forwarded to the payload: status signal, 143", delay, res.Status, res.ExitCode, res.Message)
			}
			forwarded++
			nothingLeft(t, cmd.Process.Pid, m, res.ID)
		}
		t.Logf("60 SIGTERMs: %d killed sbx before its sandbox, %d were forwarded to the payload", died, forwarded)
		if forwarded == 0 {
			t.Errorf("no SIGTERM reached a payload: the sweep never got past the start")
		}
	})
}

// waitReading waits until pid is sbx (setpriv has exec'd it) with a
// thread in read(2) on fd 0: /proc/PID/task/TID/syscall starts with the
// syscall's number and its first argument (read is 0 on x86-64, 63 on
// arm64).
func waitReading(t *testing.T, pid int) {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if exe, _ := os.Readlink(filepath.Join(dir, "exe")); !strings.Contains(filepath.Base(exe), "sbx") {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(dir, "task"))
		for _, e := range ents {
			sc, _ := os.ReadFile(filepath.Join(dir, "task", e.Name(), "syscall"))
			if strings.HasPrefix(string(sc), "0 0x0 ") || strings.HasPrefix(string(sc), "63 0x0 ") {
				return
			}
		}
	}
	t.Fatalf("sbx (pid %d) never read its stdin", pid)
}

// diedOf says whether err is sbx's death by sig.
func diedOf(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// noRunID matches no run's cgroup: sbx died before it had a Result to
// name its id; newEmptyCgroups looks for its groups instead.
const noRunID = "no-such-run-id"

// sbxCgroups are the sbx-* cgroup directories now, anyone's.
func sbxCgroups() map[string]bool {
	set := map[string]bool{}
	for _, p := range cgroupsOf("") {
		set[p] = true
	}
	return set
}

// newEmptyCgroups are sbx-* cgroups not in before that hold no process
// and still exist a second later: a killed sbx's leftovers. Another
// run's live group holds its init; one it is removing is gone by then.
func newEmptyCgroups(before map[string]bool) []string {
	var cands []string
	for p := range sbxCgroups() {
		if !before[p] {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	time.Sleep(time.Second)
	var left []string
	for _, p := range cands {
		procs, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err == nil && len(bytes.TrimSpace(procs)) == 0 {
			left = append(left, p)
		}
	}
	return left
}
