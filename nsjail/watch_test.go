package nsjail

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeInit starts a process that stands for the init (it never reports
// and never exits by itself) and the goroutine that reaps it.
func fakeInit(t *testing.T) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, exited
}

// running returns a supervisor whose payload was sent (Exec), as watch
// sees it when the init reports the payload's start.
func running(job *Job) *supervisor {
	s := &supervisor{job: job, res: &Result{}, execCh: make(chan struct{}), readyCh: make(chan struct{})}
	close(s.execCh)
	return s
}

// watchWithin runs watch and fails the test if it does not return: sbx
// would hang.
func watchWithin(t *testing.T, s *supervisor, cmd *exec.Cmd, events chan statusEvent, exited <-chan error) (*StatusMsg, error) {
	t.Helper()
	type ret struct {
		exit *StatusMsg
		err  error
	}
	done := make(chan ret, 1)
	go func() {
		exit, err := s.watch(context.Background(), cmd, events, exited)
		done <- ret{exit, err}
	}()
	select {
	case r := <-done:
		return r.exit, r.err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("watch did not return")
		return nil, nil
	}
}

func TestWatchFramingErrorIsFatal(t *testing.T) {
	cmd, exited := fakeInit(t)
	s := running(&Job{Timeout: time.Hour})
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindStarted, Pid: 2}}
	events <- statusEvent{err: fmt.Errorf("%w: line longer than %d bytes", errStatusFraming, maxStatusLine)}
	close(events)
	exit, err := watchWithin(t, s, cmd, events, exited)
	if exit != nil || err == nil || !strings.Contains(err.Error(), "status pipe") || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("watch = %v, %v; want the framing error, the sandbox killed", exit, err)
	}
	if !s.hardKilled || s.waitErr == nil {
		t.Fatalf("hardKilled %v, wait %v: want the init SIGKILLed and reaped", s.hardKilled, s.waitErr)
	}
}

// TestWatchTimersOutliveTheStream is the hang of issue 11, finding 2: the
// status stream stops while the init lives on. The wall limit must still
// end the run.
func TestWatchTimersOutliveTheStream(t *testing.T) {
	cmd, exited := fakeInit(t)
	s := running(&Job{Timeout: 100 * time.Millisecond})
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindStarted, Pid: 2}}
	close(events)
	_, err := watchWithin(t, s, cmd, events, exited)
	if err != nil || s.killedFor != "timeout" || !s.hardKilled {
		t.Fatalf("watch = %v, killedFor %q, hardKilled %v; want the timeout, then the hard kill", err, s.killedFor, s.hardKilled)
	}
}

func TestWatchSignalEndsReport(t *testing.T) {
	cmd, exited := fakeInit(t)
	sigs := make(chan os.Signal, 1)
	s := running(&Job{Timeout: time.Hour, Signals: sigs})
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindStarted, Pid: 2}}
	events <- statusEvent{msg: StatusMsg{Kind: kindExit}}
	go func() {
		time.Sleep(100 * time.Millisecond)
		sigs <- syscall.SIGTERM
		time.Sleep(100 * time.Millisecond)
		close(events) // the init's EOF, once it is killed
	}()
	exit, err := watchWithin(t, s, cmd, events, exited)
	if err != nil || exit == nil || !s.reportCut || !s.hardKilled {
		t.Fatalf("watch = %v, %v, reportCut %v, hardKilled %v; want the exit kept, the report cut", exit, err, s.reportCut, s.hardKilled)
	}
	if w := strings.Join(s.warnings, "\n"); !strings.Contains(w, "SIGTERM") {
		t.Fatalf("warnings %q do not name SIGTERM", w)
	}
}

// TestWatchBrokenReportIsFatal: a workspace report stream that broke the
// protocol ends the report at once; the payload's exit is kept.
func TestWatchBrokenReportIsFatal(t *testing.T) {
	cmd, exited := fakeInit(t)
	s := running(&Job{Timeout: time.Hour})
	s.filesBroken = make(chan error, 1)
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindStarted, Pid: 2}}
	events <- statusEvent{msg: StatusMsg{Kind: kindExit}}
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.filesBroken <- fmt.Errorf("files pipe: record longer than %d bytes", 64<<10)
		time.Sleep(100 * time.Millisecond)
		close(events)
	}()
	exit, err := watchWithin(t, s, cmd, events, exited)
	if err != nil || exit == nil || !s.reportCut || !s.hardKilled {
		t.Fatalf("watch = %v, %v, reportCut %v, hardKilled %v; want the exit kept, the report cut", exit, err, s.reportCut, s.hardKilled)
	}
}
