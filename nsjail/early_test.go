package nsjail

import (
	"bufio"
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/seccomp/install"
	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// earlySupervisor is a supervisor as Run leaves it for writeSetup with a
// payload known up front: the filter compiled, the cgroup made, the init
// not yet attached. It returns the control pipe's read end.
func earlySupervisor(t *testing.T) (*supervisor, *bufio.Reader) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	spec := validSpec()
	s := &supervisor{
		job: &Job{Spec: spec}, res: &Result{}, ctlW: w,
		setupSent: make(chan struct{}), inputsDone: make(chan struct{}), execCh: make(chan struct{}),
		cgReady: make(chan struct{}), attached: make(chan struct{}), filter: make(chan compiled, 1),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	t.Cleanup(func() { s.cancel(nil) })
	close(s.cgReady)
	s.filter <- compiled{f: &install.Filter{Policy: policyname.Guard, BPF: []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}}}
	pl := &Payload{Argv: []string{"python3", "-c", "pass"}}
	line, err := encodeCtl(ctlMsg{Kind: ctlPayload, Payload: pl})
	if err != nil {
		t.Fatal(err)
	}
	s.early = &earlyPayload{line: line, pl: pl}
	return s, bufio.NewReaderSize(r, 64<<10)
}

// readSetup reads the Spec and the Confine writeSetup sends first.
func readSetup(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if _, err := expect(br, ctlSpec); err != nil {
		t.Fatal(err)
	}
	if _, err := expect(br, ctlConfine); err != nil {
		t.Fatal(err)
	}
}

// TestEarlyPayloadWaitsForTheAttach: Run's payload follows the Confine on
// the control pipe, but never before the init is in its cgroup (on v1
// without the clone's move the init is attached while it sets up: a
// payload forked before would escape the limits), and execCh is closed
// before it is written (watch must know of the payload before the init
// reports its start). The wait is a window, never a bound: a broken
// writer shows its payload at once, and a loaded host can only make
// this test miss, never fail it wrongly.
func TestEarlyPayloadWaitsForTheAttach(t *testing.T) {
	s, br := earlySupervisor(t)
	go s.writeSetup(ctlLineOf(t, ctlMsg{Kind: ctlSpec, Spec: &s.job.Spec}))
	readSetup(t, br)
	<-s.setupSent // start's wait: the Confine is out, the payload not
	got := make(chan error, 1)
	go func() {
		m, err := expect(br, ctlPayload)
		if err == nil && m.Payload.Argv[0] != "python3" {
			err = os.ErrInvalid
		}
		select {
		case <-s.execCh:
		default:
			t.Error("the payload was on the pipe before execCh was closed")
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the payload crossed before the init was attached to its cgroup (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(s.attached)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("after the attach: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no payload after the attach")
	}
	select {
	case <-s.inputsDone:
	case <-time.After(time.Minute):
		t.Fatal("inputsDone not closed once the payload was sent")
	}
}

// TestEarlyPayloadNotSentWhenTheAttachFails: an init that could not be
// attached never gets its payload (start fails with the attach error);
// nothing waits for inputs that will never cross.
func TestEarlyPayloadNotSentWhenTheAttachFails(t *testing.T) {
	s, br := earlySupervisor(t)
	s.attachErr = syscall.EACCES
	close(s.attached)
	done := make(chan struct{})
	go func() { s.writeSetup(ctlLineOf(t, ctlMsg{Kind: ctlSpec, Spec: &s.job.Spec})); close(done) }()
	readSetup(t, br)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("writeSetup did not return")
	}
	<-s.inputsDone
	select {
	case <-s.execCh:
		t.Fatal("execCh closed for a payload that was not sent")
	default:
	}
	s.ctlW.Close()
	if _, err := expect(br, ctlPayload); err == nil {
		t.Fatal("the payload was sent to an init outside its cgroup")
	}
}

// TestEarlyPayloadNotSentAfterTeardown: a sandbox torn down before its
// init was attached (a clone that failed never attaches it) leaves no
// writer waiting for the attach.
func TestEarlyPayloadNotSentAfterTeardown(t *testing.T) {
	s, br := earlySupervisor(t)
	done := make(chan struct{})
	go func() { s.writeSetup(ctlLineOf(t, ctlMsg{Kind: ctlSpec, Spec: &s.job.Spec})); close(done) }()
	readSetup(t, br)
	s.cancel(ErrClosed)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("writeSetup still waits for an attach that never comes")
	}
	<-s.inputsDone
}

// ctlLineOf is ctlLine as bytes.
func ctlLineOf(t *testing.T, m ctlMsg) []byte { return []byte(ctlLine(t, m)) }

// TestWatchReadyAfterTheEarlyPayload: Run's payload may be on its way
// (execCh closed) before the init's "ready" is read. The ready must still
// release start, and the payload's start must still be taken and timed:
// here the wall limit fires, which only a "started" accepted arms.
func TestWatchReadyAfterTheEarlyPayload(t *testing.T) {
	cmd, exited := fakeInit(t)
	s := running(&Job{Timeout: 50 * time.Millisecond})
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindReady}}
	events <- statusEvent{msg: StatusMsg{Kind: kindStarted, Pid: 2}}
	go func() {
		select {
		case <-s.readyCh:
		case <-time.After(10 * time.Second):
		}
		time.Sleep(200 * time.Millisecond)
		close(events)
	}()
	_, err := watchWithin(t, s, cmd, events, exited)
	select {
	case <-s.readyCh:
	default:
		t.Fatal("the ready after the early payload did not release start")
	}
	if s.killedFor != StatusTimeout {
		t.Fatalf("watch = %v, killedFor %q; want the wall limit armed by the payload's start", err, s.killedFor)
	}
}

// TestWatchHoldsSignalsUntilThePayload: a signal sbx gets before the
// payload is on its way is held, and sent after the Payload on the
// control pipe (the init reads the Payload next and would fail on
// anything else), whoever writes it: Exec, or writeSetup for Run.
func TestWatchHoldsSignalsUntilThePayload(t *testing.T) {
	cmd, exited := fakeInit(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	sigs := make(chan os.Signal, 1)
	s := &supervisor{job: &Job{Signals: sigs}, res: &Result{}, execCh: make(chan struct{}), readyCh: make(chan struct{}), ctlW: w}
	events := make(chan statusEvent, 4)
	events <- statusEvent{msg: StatusMsg{Kind: kindReady}}
	watched := make(chan struct{})
	go func() { defer close(watched); watchWithin(t, s, cmd, events, exited) }()
	defer func() { close(events); cmd.Process.Kill(); <-watched }()
	<-s.readyCh
	sigs <- syscall.SIGTERM
	// Held, whatever the wait: nothing is on the pipe before the Payload.
	time.Sleep(100 * time.Millisecond)
	// The payload's writer: execCh closed under ctlMu, then the Payload,
	// then ctlMu released.
	s.ctlMu.Lock()
	close(s.execCh)
	w.Write(ctlLineOf(t, ctlMsg{Kind: ctlPayload, Payload: &Payload{Argv: []string{"python3"}}}))
	s.ctlMu.Unlock()
	r.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(r)
	if _, err := expect(br, ctlPayload); err != nil {
		t.Fatalf("first on the control pipe: %v; want the Payload", err)
	}
	m, err := expect(br, ctlControl)
	if err != nil || m.Control.Signal != int(syscall.SIGTERM) {
		t.Fatalf("after the Payload: %+v, %v; want the held SIGTERM", m, err)
	}
}
