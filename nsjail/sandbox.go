package nsjail

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/internal/initbin"
)

// Phase is where a Sandbox is in its one life. It only moves forward.
type Phase int

const (
	// PhaseStarting: Start is building the sandbox.
	PhaseStarting Phase = iota
	// PhaseReady: built and confined (namespaces, cgroup, mounts,
	// privileges dropped, seccomp loaded), waiting for its payload.
	PhaseReady
	// PhaseRunning: Exec sent the payload; it starts, runs, or is killed.
	PhaseRunning
	// PhaseReporting: the payload ended; the workspace report crosses.
	PhaseReporting
	// PhaseClosed: the init is gone and the sandbox destroyed.
	PhaseClosed
)

func (p Phase) String() string {
	switch p {
	case PhaseStarting:
		return "starting"
	case PhaseReady:
		return "ready"
	case PhaseRunning:
		return "running"
	case PhaseReporting:
		return "reporting"
	case PhaseClosed:
		return "closed"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// IO is where one execution's stdio goes.
type IO struct {
	// Stdin is copied to the payload's stdin. It needs a sandbox started
	// with a Job.Stdin (which Exec then ignores); without one the payload
	// reads /dev/null. nil closes the pipe: the payload reads EOF.
	Stdin io.Reader
	// Stdout and Stderr, when set, get the payload's output live.
	Stdout, Stderr io.Writer
	// OutputDir, when set, receives the files this payload created or
	// changed in the workspace (Spec.Outputs bounds them), as
	// Job.OutputDir does for Run: one request's, so a sandbox started
	// ahead of its request (the pool) takes it here.
	OutputDir string
	// Timings, when set, gets this execution's per-step timeline, as
	// Job.Timings does for Run. A sandbox started without Job.Timings
	// has no marks of its start, only of the execution.
	Timings io.Writer
}

// Errors of the handle's use, as opposed to a run's failure, which is a
// Result with StatusSetupError.
var (
	// ErrUsed: a sandbox serves exactly one payload.
	ErrUsed = errors.New("nsjail: the sandbox already ran its payload (a sandbox serves exactly one)")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("nsjail: the sandbox is closed")
	// ErrNoStdin: IO.Stdin given to a sandbox started without Job.Stdin.
	ErrNoStdin = errors.New("nsjail: the sandbox was started without a stdin pipe (set Job.Stdin)")
)

// Sandbox is one sandbox, built and confined by Start, which runs one
// payload (Exec) and is then destroyed (Close). It is modelled on runc's
// parentProcess and go-judge's Environment → Process: the phases are
// typed, and the one-shot channels of a run are fields set before Start
// returns.
type Sandbox struct {
	s *supervisor
}

// Start builds a sandbox up to "ready": namespaces, the cgroup with its
// limits (the init in it), the mounts, privileges dropped and the seccomp
// filter loaded in the init. Job.Payload, Job.Stdout and Job.Stderr are
// not used: they are Exec's. Job.Stdin only says whether the payload gets
// a stdin pipe. ctx bounds Start only.
func Start(ctx context.Context, job *Job) (*Sandbox, error) {
	s := newSupervisor(job)
	s.tl.mark("sbx: Start")
	if err := s.start(ctx); err != nil {
		s.teardown()
		return nil, err
	}
	return &Sandbox{s}, nil
}

// Phase says where the sandbox is.
func (sb *Sandbox) Phase() Phase { return sb.s.getPhase() }

// InitPid is the host pid of the sandbox's init.
func (sb *Sandbox) InitPid() int { return sb.s.cmd.Process.Pid }

// Exec sends the payload (code, argv, env, input files) and returns its
// Result once the payload ended and its workspace was reported; the
// sandbox is then destroyed. The Result's clock starts at Exec. A failure
// of sbx is a Result with StatusSetupError; the error is for misuse only
// (ErrUsed, ErrClosed, ErrNoStdin). ctx bounds the execution: cancelling
// it kills the sandbox, as Close does.
func (sb *Sandbox) Exec(ctx context.Context, p Payload, pio IO) (*Result, error) {
	s := sb.s
	if pio.Stdin != nil && s.job.Stdin == nil {
		return nil, ErrNoStdin
	}
	if err := s.claim(); err != nil {
		return nil, err
	}
	defer close(s.execDone)
	if pio.Timings != nil {
		s.timings = pio.Timings
		s.tl.on.Store(true)
	}
	s.begun = time.Now()
	s.res.StartedAt = s.begun.UTC()
	s.tl.mark("sbx: Exec")
	err := CheckPayload(&p)
	var inputs []*os.File
	if err == nil {
		inputs, err = openInputs(p.Files)
	}
	if err == nil {
		err = s.exec(ctx, &p, inputs, pio)
	} else {
		// The sandbox was meant for this payload: it goes with it.
		s.cancel(err)
		<-s.watchDone
	}
	closeFiles(inputs)
	s.teardown()
	return s.result(err), nil
}

// Close kills the sandbox, waits for its init, and destroys what is left
// (the cgroup, the pipes). A running Exec returns at once, cancelled.
// Close after Exec returned has nothing left to do; it is safe to call
// more than once.
func (sb *Sandbox) Close() error {
	s := sb.s
	s.cancel(ErrClosed)
	<-s.watchDone
	s.phaseMu.Lock()
	begun := s.execBegun
	s.phaseMu.Unlock()
	if begun {
		<-s.execDone
	}
	s.teardown()
	return nil
}

// Run builds the sandbox, runs the payload in it and returns its Result:
// Start, Exec and Close in one. It never panics on bad input and always
// returns a Result: a failure of sbx itself is StatusSetupError with the
// reason in Message.
func Run(ctx context.Context, job *Job) *Result {
	s := newSupervisor(job)
	s.tl.mark("sbx: Run")
	// The payload is checked, and its inputs opened, before anything is
	// built: a bad one costs no sandbox.
	err := errors.Join(job.Spec.Validate(), CheckPayload(&job.Payload))
	var inputs []*os.File
	if err == nil {
		inputs, err = openInputs(job.Payload.Files)
	}
	pio := IO{Stdin: job.Stdin, Stdout: job.Stdout, Stderr: job.Stderr, OutputDir: job.OutputDir, Timings: job.Timings}
	if err == nil && job.Spec.Warm == nil {
		// Known up front, the payload follows the Confine on the control
		// pipe (writeSetup): the init reads it as soon as it is
		// confined, without waiting for the supervisor to see "ready"
		// and answer. A warm sandbox's payload comes later, by Exec.
		// Its line is encoded by start, once the cgroup is being made
		// (encodeEarlyPayload).
		s.early = &earlyPayload{pl: &job.Payload, inputs: inputs}
		s.early.outputs, err = s.preparePayload(&job.Payload, pio)
	}
	if err == nil {
		err = s.start(ctx)
	}
	if err == nil && s.claim() == nil {
		err = s.exec(ctx, &job.Payload, inputs, pio)
		close(s.execDone)
	}
	closeFiles(inputs)
	s.teardown()
	return s.result(err)
}

// isClosed says whether ch is closed (it is never sent on).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// earlyPayload is a payload sent right after the Confine (Run): its
// control line, encoded before the sandbox existed, its open inputs and
// what the workspace report is to send.
type earlyPayload struct {
	line    []byte
	pl      *Payload
	inputs  []*os.File
	outputs OutputSpec
}

func newSupervisor(job *Job) *supervisor {
	initbin.Prepare()
	s := &supervisor{
		job:         job,
		begun:       time.Now(),
		inputsDone:  make(chan struct{}),
		setupSent:   make(chan struct{}),
		attached:    make(chan struct{}),
		cgReady:     make(chan struct{}),
		readyCh:     make(chan struct{}),
		execCh:      make(chan struct{}),
		watchDone:   make(chan struct{}),
		execDone:    make(chan struct{}),
		overflow:    make(chan struct{}),
		filesBroken: make(chan error, 1),
		filter:      make(chan compiled, 1),
	}
	s.res = newResult(job.Spec.ID, job.Spec.Profile, s.begun)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.tl.on.Store(job.Timings != nil)
	s.timings = job.Timings
	if job.T0 != 0 {
		s.tl.marks = append(s.tl.marks, Mark{"sbx: main started (Go's runtime and package inits done)", job.T0})
	}
	s.tl.add(job.Marks)
	if job.Spec.Outputs == (OutputSpec{}) {
		job.Spec.Outputs = DefaultOutputSpec()
	}
	return s
}

func (s *supervisor) getPhase() Phase {
	s.phaseMu.Lock()
	defer s.phaseMu.Unlock()
	return s.phase
}

func (s *supervisor) setPhase(p Phase) {
	s.phaseMu.Lock()
	defer s.phaseMu.Unlock()
	if p > s.phase {
		s.phase = p
	}
}

// claim moves a ready sandbox to running, for its one payload.
func (s *supervisor) claim() error {
	s.phaseMu.Lock()
	defer s.phaseMu.Unlock()
	switch {
	case s.phase == PhaseClosed:
		return ErrClosed
	case s.execBegun:
		return ErrUsed
	case s.early != nil && s.phase >= PhaseReady:
		// Run's payload went with the Confine: it may have started, or
		// even ended (watch's PhaseReporting), before Run claims it.
		s.phase, s.execBegun = max(s.phase, PhaseRunning), true
		return nil
	case s.phase != PhaseReady:
		return ErrUsed
	}
	s.phase, s.execBegun = PhaseRunning, true
	return nil
}

// onTeardown registers f to run when the sandbox is destroyed (in reverse
// order of registration, like defer).
func (s *supervisor) onTeardown(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *supervisor) teardown() {
	s.teardownOnce.Do(func() {
		for i := len(s.cleanups) - 1; i >= 0; i-- {
			s.cleanups[i]()
		}
		s.cancel(ErrClosed) // nothing is left to cancel; releases the context
		s.setPhase(PhaseClosed)
	})
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// start builds the sandbox and returns once the init said ready (it is
// confined) and is in its cgroup, or with why it never got there.
func (s *supervisor) start(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.cancel(context.Cause(ctx)) })
	defer stop()
	job := s.job
	if err := job.Spec.Validate(); err != nil {
		return err
	}
	if job.Proxy != nil {
		s.onTeardown(func() { job.Proxy.Close() })
		job.Spec.Proxy = true
		prepareEgress(job)
		job.Spec.Env = withProxyEnv(job.Spec.Env, noProxyFor(job.Proxy))
	}
	if err := s.setupLimits(); err != nil {
		return err
	}
	s.onTeardown(s.destroyCgroup)
	s.tl.mark("sbx: limits set up")
	go compileFilter(job.Spec.Seccomp, s.filter)
	if err := s.encodeEarlyPayload(); err != nil {
		return err
	}
	specLine, err := encodeCtl(ctlMsg{Kind: ctlSpec, Spec: &job.Spec})
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	p := &s.p
	s.onTeardown(p.closeAll)
	if err := p.open(job.Stdin != nil, job.Proxy != nil, job.Spec.Session); err != nil {
		return err
	}
	s.ctlW = p.ctlW

	// The Spec usually fits in the pipe's buffer, so it is waiting when
	// the init comes up; the Confine follows once the filter is compiled.
	go s.writeSetup(specLine)
	s.chooseInit()
	cmd := s.initCmd(p)
	s.cmd = cmd
	started := make(chan error, 1)
	exited := make(chan error, 1)
	owner := ownerFor(job.Spec.ID)
	// startAndWait reports false when its thread is stuck in the
	// sandbox's cgroup: it must never be unlocked (it ends with the
	// goroutine).
	startAndWait := func(err error) bool {
		if err != nil {
			started <- err
			return true
		}
		// Before the cgroup: a real-time thread could not join it.
		if err := resetSchedOnFork(); err != nil {
			started <- fmt.Errorf("keep the caller's scheduling priority from the sandbox: %w", err)
			return true
		}
		// cgroup v1: the thread clones the init from inside its cgroup
		// (joinCgroupForClone), and is out again before anything else.
		m, err := s.joinCgroupForClone()
		if err != nil {
			started <- err
			return false
		}
		// spawnInit clones without copying the supervisor (CLONE_VM,
		// spawn_linux.c; on v2 with a cgroup, clone3 into it);
		// cmd.Start, a full fork, where it cannot.
		spawned := true
		err = spawnInit(cmd)
		if errors.Is(err, errSpawnUnsupported) {
			if err != errSpawnUnsupported {
				s.tl.mark("sbx: the init's clone falls back to cmd.Start (" + err.Error() + ")")
			}
			spawned = false
			err = startWithOSExec(cmd)
		}
		wait := func() error {
			// The thread stays locked while the init lives (Pdeathsig)
			// but parks in the netpoller, not in waitid, until the init
			// is gone (awaitExit).
			if err := awaitExit(cmd.Process.Pid); err != nil {
				s.tl.mark("sbx: " + err.Error() + "; waitid blocks instead")
			}
			if spawned {
				return waitSpawned(cmd)
			}
			return cmd.Wait()
		}
		if err == nil {
			s.tl.mark(cloneMark(spawned, cmd.SysProcAttr.UseCgroupFD))
		}
		if lerr := s.leaveCgroupAfterClone(m); lerr != nil {
			if err == nil {
				cmd.Process.Kill()
				wait()
			}
			started <- lerr
			return false
		}
		if err != nil {
			started <- startError(err)
			return true
		}
		started <- nil
		exited <- wait()
		return true
	}
	go func() {
		// Pdeathsig fires when the thread that started the child exits,
		// not the process (prctl(2), PR_SET_PDEATHSIG), so the start and
		// the wait share one locked thread. Started by root, that thread
		// takes the run's host uid first, so that it owns the sandbox's
		// user namespace, and is never given back (nsOwner.onThread).
		// The cgroup v1 move in and out needs no uid of its own: the
		// tasks files were opened by New, and v1 checks the opener's
		// credentials (cgroup.JoinThread).
		if owner != nil {
			owner.onThread(func(err error) { startAndWait(err) })
			return
		}
		runtime.LockOSThread()
		if startAndWait(nil) {
			runtime.UnlockOSThread()
		}
	}()
	s.tl.mark("sbx: prepared (pipes)")
	if err := <-started; err != nil {
		if ti := (*threadInsideError)(nil); errors.As(err, &ti) {
			ti.awaitGone()
		}
		close(s.watchDone) // no watch: Close must not wait for one
		return err
	}
	p.closeChildEnds()
	s.attachInit(cmd.Process.Pid)
	if job.Proxy != nil {
		// The goroutine owns the socket from here: it reads it with a raw
		// recvmsg, which closeAll must not race.
		go s.serveProxy(p.proxyR)
		p.proxyR = nil
	}
	events := make(chan statusEvent, 4)
	go readStatus(p.stR, events)
	go func() {
		defer close(s.watchDone)
		s.exit, s.runErr = s.watch(s.ctx, cmd, events, exited)
	}()

	select {
	case <-s.readyCh:
	case <-s.watchDone:
		if s.early == nil || !isClosed(s.readyCh) {
			// The init is gone before it was ready: say why.
			if err := s.conclude(); err != nil {
				return err
			}
			return errors.New("sbx init ended before it was ready")
		}
		// Ready, and already over: an early payload (Run) can end
		// before start looks; exec collects it as any other. (A
		// sandbox started for Exec that is gone fails its start.)
	}
	// Nothing of the payload may reach the init before the init is in
	// its cgroup: what it forks earlier would stay outside.
	<-s.attached
	<-s.setupSent
	if s.attachErr != nil {
		s.confineErr = s.attachErr
		s.cancel(s.attachErr)
		<-s.watchDone
		return s.attachErr
	}
	s.setPhase(PhaseReady)
	s.tl.mark("sbx: sandbox ready")
	return nil
}

// exec runs one payload in a ready sandbox and fills the Result. The
// inputs are open, their sizes fixed (openInputs).
func (s *supervisor) exec(ctx context.Context, pl *Payload, inputs []*os.File, pio IO) error {
	stop := context.AfterFunc(ctx, func() { s.cancel(context.Cause(ctx)) })
	defer stop()
	job, p := s.job, &s.p
	var payloadLine []byte
	var outputs OutputSpec
	if s.early != nil {
		outputs = s.early.outputs
	} else {
		var err error
		if outputs, err = s.preparePayload(pl, pio); err == nil {
			payloadLine, err = encodePayload(pl)
		}
		if err != nil {
			close(s.inputsDone)
			s.cancel(err)
			<-s.watchDone
			return err
		}
	}
	s.stdout = newCapture(job.OutputLimit, pio.Stdout)
	s.stderr = newCapture(job.OutputLimit, pio.Stderr)
	if job.Limits.OutputKill {
		var once sync.Once
		over := func() { once.Do(func() { close(s.overflow) }) }
		s.stdout.onOverflow, s.stderr.onOverflow = over, over
	}
	s.readers.Add(3)
	go func() { defer s.readers.Done(); io.Copy(s.stdout, p.outR) }()
	go func() { defer s.readers.Done(); io.Copy(s.stderr, p.errR) }()
	filesBroken := s.filesBroken // buffered: the one send never blocks
	go func() {
		defer s.readers.Done()
		var err error
		s.res.Files, s.res.FilesTruncated, s.res.FilesTruncatedReason, err = readFiles(p.filesR, outputs, s.sink)
		s.tl.mark("sbx: workspace report read")
		if err != nil {
			// A broken report stream ends the run (watch); its EOF after
			// the init's death comes too late to matter.
			s.filesErr = err
			filesBroken <- err
		}
		io.Copy(io.Discard, p.filesR) // never leave the init blocked on a full pipe
	}()
	if p.inW != nil {
		go func(w *os.File, r io.Reader) {
			if r != nil {
				io.Copy(w, r)
			}
			w.Close()
		}(p.inW, pio.Stdin)
		p.inW = nil
	}
	if s.early == nil {
		// The payload goes first on the control pipe; a signal or a kill
		// watch sends meanwhile waits for it (ctlMu, handed to the
		// writer). execCh is closed first: watch must know of the
		// payload before the init can report its start. (An early
		// payload went the same way from writeSetup.)
		s.ctlMu.Lock()
		close(s.execCh)
		go s.writePayload(payloadLine, pl, inputs)
	}
	<-s.watchDone
	return s.conclude()
}

// preparePayload opens the execution's output directory, lowers a warm
// sandbox's limits, and sets in the payload what this request asks of the
// report and of the init; it returns what the workspace report sends.
// The payload's control line is encodePayload's. It writes nothing to the
// init.
func (s *supervisor) preparePayload(pl *Payload, pio IO) (OutputSpec, error) {
	job := s.job
	if err := s.openSink(pio.OutputDir); err != nil {
		return OutputSpec{}, err
	}
	if err := s.applyLower(pl); err != nil {
		return OutputSpec{}, err
	}
	// What this request asks of the report and of the init travels with
	// its payload, never in the Spec.
	pl.Send, pl.Timings = s.sink != nil, s.tl.on.Load()
	pl.CaptureError = pythonArgv(pl.Argv) && !job.Spec.Session
	if !pl.CaptureError {
		pl.FigureBytes = 0
	}
	pl.FigureBytes = min(max(0, pl.FigureBytes), MaxFigureBytes)
	s.figureBytes = pl.FigureBytes
	outputs := job.Spec.Outputs
	outputs.Send = pl.Send
	return outputs, nil
}

// encodePayload is the payload's control line (preparePayload first).
func encodePayload(pl *Payload) ([]byte, error) {
	line, err := encodeCtl(ctlMsg{Kind: ctlPayload, Payload: pl})
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return line, nil
}

// encodeEarlyPayload encodes Run's payload line (none for a sandbox
// started for Exec). start calls it once the cgroup is being made
// (setupLimits' goroutine), not Run before start: it is the process's
// first JSON encode of a control message, encoding/json's cold
// reflection over every type of the union (~0.3 ms), which then runs
// beside the cgroup's mkdirs instead of before them on the path to the
// clone, where a second P has them (issue 13). A payload too large for
// the control pipe still fails the start before the clone; its cgroup is
// torn down with the rest.
func (s *supervisor) encodeEarlyPayload() error {
	if s.early == nil {
		return nil
	}
	var err error
	s.early.line, err = encodePayload(s.early.pl)
	return err
}

// conclude collects a run whose watch has returned: the output drained,
// the inputs' record, and the status decided (finish).
func (s *supervisor) conclude() error {
	// After finish: the task clock may raise usage.cpu_ms (cputotal_linux.go).
	defer s.closeCPUClock()
	<-s.cgReady // what it wrote to the Result is read below
	if s.execBegun {
		// The init, the control pipe's only reader, is gone: the writer
		// has finished, or failed with EPIPE.
		<-s.inputsDone
		s.res.Inputs = s.inputs
	}
	s.tl.mark("sbx: init reaped")
	s.readers.Wait()
	if s.stdout != nil {
		s.stdout.Finish()
		s.stderr.Finish()
	}
	s.tl.mark("sbx: output drained")
	if s.reportCut {
		s.res.FilesTruncated = true
	}
	<-s.setupSent
	if s.confineErr != nil {
		return s.confineErr
	}
	if s.runErr != nil {
		return s.runErr
	}
	if s.filesErr != nil && s.exit != nil && !s.killed() {
		s.warnings = append(s.warnings, "workspace report incomplete: "+s.filesErr.Error())
	}
	return s.finish(s.exit, s.cmd, s.waitErr)
}

// result completes the Result of the execution (or of the failed start).
func (s *supervisor) result(err error) *Result {
	res := s.res
	if err != nil {
		res.Status, res.ExitCode, res.Signal = StatusSetupError, ExitSbxFailed, nil
		if errors.Is(err, errCanceled) {
			res.Status = StatusCanceled
		}
		res.Message = err.Error()
	}
	if s.stdout != nil {
		res.Stdout, res.StdoutTruncated, res.StdoutBytes = s.stdout.String(), s.stdout.Truncated(), s.stdout.Total()
		res.Stderr, res.StderrTruncated, res.StderrBytes = s.stderr.String(), s.stderr.Truncated(), s.stderr.Total()
	}
	res.FillEmpty()
	s.warnMu.Lock()
	res.Warnings = s.warnings
	s.warnMu.Unlock()
	end := time.Now()
	res.FinishedAt = end.UTC()
	res.Usage.WallMS = end.Sub(s.begun).Milliseconds()
	s.tl.mark("sbx: result ready")
	if s.timings != nil {
		s.tl.print(s.timings)
	}
	return res
}

// writeSetup sends the Spec at once and the Confine as soon as the filter
// is compiled and the late rlimits are known (the cgroup is made, or
// failed): the init reads it after its mounts and confines itself before
// it says ready. The control pipe stays open afterwards: its EOF tells the
// init that the supervisor is gone.
//
// With an early payload (Run) the Payload and its inputs follow the
// Confine, once the init is in its cgroup: on cgroup v1 without the
// clone's move (attachInit) the init is attached while it sets up, and a
// payload it forked before that would escape the limits. execCh is
// closed before the Payload is written, as Exec does, and ctlMu is held
// until the inputs are through: a signal watch holds until the payload
// is on its way comes after it, never before.
func (s *supervisor) writeSetup(specLine []byte) {
	s.ctlMu.Lock()
	sent := s.sendSetup(specLine)
	close(s.setupSent)
	e := s.early
	if e == nil {
		s.ctlMu.Unlock()
		return
	}
	if sent {
		select {
		case <-s.attached:
		case <-s.ctx.Done():
			// Torn down before the init was attached (a failed clone
			// never attaches it): there is no payload to send.
			sent = false
		}
	}
	if !sent || s.attachErr != nil {
		// start fails with why (confineErr, attachErr, the init's own
		// error); the payload never reaches the init.
		close(s.inputsDone)
		s.ctlMu.Unlock()
		return
	}
	close(s.execCh)
	s.tl.mark("sbx: payload sent after the confine")
	s.writePayload(e.line, e.pl, e.inputs)
}

// sendSetup writes the Spec and the Confine (writeSetup, which holds
// ctlMu); false: the Confine was not sent, confineErr says why, and the
// control pipe is closed.
//
// Each message is one write of a whole buffer (encodeCtl's), straight to
// the pipe: a bufio.Writer would flush each at once anyway (the init can
// start on the Spec while the filter compiles) and only copy the ~20 KB
// into 64 KB of its own, fresh heap pages (issue 13).
func (s *supervisor) sendSetup(specLine []byte) bool {
	s.ctlW.Write(specLine)
	c := <-s.filter
	if c.err != nil {
		s.confineErr = fmt.Errorf("seccomp policy %s: %w", s.job.Spec.Seccomp, c.err)
		s.ctlW.Close() // the init fails reading the rest, and says so
		return false
	}
	s.tl.mark(c.mark())
	<-s.cgReady
	if s.cgErr != nil {
		// No sandbox without its cgroup: the init fails reading the
		// Confine, and the run with cgErr.
		s.confineErr = s.cgErr
		s.ctlW.Close()
		return false
	}
	if s.job.Spec.Warm != nil {
		// A warm init forks the payload's interpreter once confined,
		// before it says ready: it must be in its cgroup by then
		// (cgroup v1 attaches it after the clone, attachInit).
		<-s.attached
		if s.attachErr != nil {
			s.confineErr = s.attachErr
			s.ctlW.Close()
			return false
		}
	}
	confine, err := encodeCtl(ctlMsg{Kind: ctlConfine, Confine: &Confine{Seccomp: c.f, Rlimits: s.lateRlimits}})
	if err != nil {
		s.confineErr = err
		s.ctlW.Close()
		return false
	}
	s.ctlW.Write(confine)
	return true
}

// writePayload sends the Payload and the input files' bytes; the caller
// holds ctlMu, which it releases.
//
// Each input is hashed as it crosses: the Result (and the audit log) say
// exactly what the payload was given.
func (s *supervisor) writePayload(payloadLine []byte, pl *Payload, inputs []*os.File) {
	defer s.ctlMu.Unlock()
	defer close(s.inputsDone)
	// The input files' bytes cross in io.CopyN's 32 KB chunks: buffered,
	// they go with the line in fewer writes. Without inputs the line is
	// one write, and no 64 KB of fresh heap for it (issue 13).
	var w io.Writer = s.ctlW
	var bw *bufio.Writer
	if len(inputs) > 0 {
		bw = bufio.NewWriterSize(s.ctlW, 64<<10)
		w = bw
	}
	w.Write(payloadLine)
	for i, f := range inputs {
		in := pl.Files[i]
		h := sha256.New()
		src := &readErr{r: f}
		if _, err := io.CopyN(io.MultiWriter(w, h), src, in.Size); err != nil {
			if src.err != nil {
				// The file shrank or failed while it was read: stop the
				// init now (it would wait for the missing bytes) and say
				// which input it was.
				if errors.Is(src.err, io.EOF) {
					src.err = fmt.Errorf("it shrank below %d bytes while it was read", in.Size)
				}
				s.confineErr = fmt.Errorf("input %s: %w", in.Source, src.err)
				s.ctlW.Close()
			}
			// Otherwise the init is gone (EPIPE) and says why itself.
			return
		}
		s.inputs = append(s.inputs, InputEntry{Path: in.Path, Source: in.Source, Size: in.Size, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	if bw != nil {
		bw.Flush()
	}
}

// openSink opens the execution's output directory, where the report's
// file contents go (nil sink: none is kept). It is per execution, so it
// is opened at Exec, never at Start.
func (s *supervisor) openSink(dir string) error {
	if dir == "" {
		return nil
	}
	od, err := openOutputDir(dir)
	if err != nil {
		return err
	}
	s.onTeardown(func() { od.Close() })
	s.sink = od
	return nil
}
