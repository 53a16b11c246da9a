package nsjail

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/internal/initbin"
	"github.com/sbx-sandbox/sbx/internal/kernel"
	"github.com/sbx-sandbox/sbx/internal/oserr"
	"github.com/sbx-sandbox/sbx/seccomp/install"
)

// Job is one run: the sandbox, what runs in it, and where its stdio goes.
type Job struct {
	Spec    Spec
	Payload Payload
	// Stdin is copied to the payload's stdin; nil gives it an empty one.
	// It is always a pipe inside, never the host's fd: a host terminal
	// must not reach the sandbox (DESIGN.md, invariant 2).
	Stdin io.Reader
	// Stdout and Stderr, when set, get the payload's output live.
	Stdout, Stderr io.Writer
	// OutputLimit is how many bytes of each stream the Result keeps.
	OutputLimit int64
	// Timeout is the wall-clock limit of the payload; 0 means none.
	Timeout time.Duration
	// OutputDir, when set, receives the files the run created or
	// changed in the workspace (Spec.Outputs bounds them).
	OutputDir string
	// Proxy, when set, serves the sandbox's only way out: connections to
	// ProxyAddr inside. Run closes it before returning.
	Proxy ProxyServer
	// Limits are enforced by the sandbox's cgroup, or rlimits without one.
	Limits Limits
	// Signals received by sbx are forwarded to the payload.
	Signals <-chan os.Signal
	// Timings, when set, gets a per-step timeline of the run (the
	// supervisor's and the init's steps). T0 is when sbx started, on
	// CLOCK_MONOTONIC (MonotonicNS), or 0 for the start of Run.
	Timings io.Writer
	T0      int64
	// Marks are the caller's own steps before Run, on the same clock.
	Marks []Mark
	// WarmResultJSON: the caller encodes the Result with encoding/json
	// once it is back (sbx exec --json, serve), so its types are warmed
	// while the payload runs (warmResultJSON).
	WarmResultJSON bool
	// HugeHeapInit: the init collapses the start of its heap into a
	// transparent huge page (internal/leanexec, HugeHeap): fewer page
	// faults on the way to the payload, for ~1.2 MB more of the init's
	// memory while the run lasts. A one-shot run asks for it (sbx exec);
	// a warm pool, whose inits wait, does not; a memory limit under 64
	// MiB, which the init's memory counts toward, refuses it
	// (hugeHeapMinMemory).
	HugeHeapInit bool
}

// MonotonicNS is the clock of Job.T0.
func MonotonicNS() int64 { return monotonicNS() }

// setupTimeout bounds how long building a sandbox may take before the
// run is abandoned as a setup error (it takes milliseconds).
const setupTimeout = 30 * time.Second

// killGrace is how long the init gets to kill the payload and report
// after the supervisor asks it to, before it is killed itself (losing the
// workspace report).
const killGrace = 2 * time.Second

// reportTimeout bounds the workspace report after the payload ended.
const reportTimeout = 60 * time.Second

// ReportGrace is how long after the wall-clock limit the run may last, for
// the kill and the workspace report: no payload keeps sbx running past
// its --timeout plus ReportGrace (plus the moments the kernel takes to
// tear the sandbox down). A report still running then is cut short, and
// the Result says so (files_truncated, a warning). It must exceed
// killGrace, so that a timed-out run still reports.
const ReportGrace = 10 * time.Second

// SetupFailure is the Result of a run that failed before a sandbox
// existed (a bad flag, a missing file).
func SetupFailure(id, profile string, err error) *Result {
	now := time.Now()
	res := newResult(id, profile, now)
	res.FinishedAt = res.StartedAt
	res.Status, res.ExitCode, res.Message = StatusSetupError, ExitSbxFailed, err.Error()
	return res
}

type supervisor struct {
	job            *Job
	res            *Result
	stdout, stderr *capture

	ctlMu sync.Mutex
	ctlW  *os.File
	tl    timeline
	// killedFor is the limit for which the supervisor ended the run, as
	// the Status it gives the Result (StatusTimeout, StatusCPULimit,
	// StatusOutputLimit), or "" if no limit ended it; aborted says why
	// it ended the run otherwise.
	killedFor  Status
	aborted    abortCause
	hardKilled bool
	// reportCut: the workspace report was ended before it finished.
	reportCut bool
	// figureBytes is what the payload's runner was asked for of figures
	// (Payload.FigureBytes): the init's figures are taken within it,
	// never without it.
	figureBytes int64
	// waitErr is the init's wait error, once watch has reaped it.
	waitErr  error
	warnings []string
	// inputs are filled by writePayload, which closes inputsDone.
	inputs     []InputEntry
	inputsDone chan struct{}
	// setupSent is closed once writeSetup has sent the Spec and the
	// Confine (or failed, with confineErr set).
	setupSent chan struct{}
	// early is Run's payload, sent by writeSetup after the Confine; nil
	// for a payload that Exec sends (the handle, a warm sandbox).
	early *earlyPayload
	// filter is the compiled seccomp filter, compiled while the init
	// sets up; confineErr is set when that failed.
	filter     chan compiled
	confineErr error
	// cg is the sandbox's cgroup, nil without one, set (with cgErr) by
	// the time cgReady is closed; attached is closed once the init is in
	// it (cgroup v1: written after the clone, while the init sets up),
	// with attachErr set if that failed.
	cg          *cgroup.Group
	cgErr       error
	cgReady     chan struct{}
	attached    chan struct{}
	attachErr   error
	lateRlimits []Rlimit
	// cpuAtKill is the total CPU measured when the run passed its CPU
	// time limit (killedFor StatusCPULimit).
	cpuAtKill time.Duration
	// base is the CPU a warm sandbox used before its payload (warm_supervisor.go).
	base cpuBase
	// cpuClock is the task-clock perf counter of the payload's tree
	// without a cgroup, or -1 (cpuClockErr says why); set before attached
	// is closed.
	cpuClock    int
	cpuClockErr error
	// tasksPolled is the most tasks the CPU poll counted (rlimit mode),
	// for usage.pids_peak and the pids evidence (evidence.go).
	tasksPolled atomic.Int64
	warnMu      sync.Mutex
	// cgBeforeClone: cg was made before the clone (pure v2), so the
	// init can be born in it; otherwise cg is being made beside it.
	cgBeforeClone bool
	// bornInCgroup: the init was born in cg and needs no attach: on
	// cgroup v2 its clone had cg's fd (CLONE_INTO_CGROUP, initCmd), on v1
	// the thread that cloned it was in cg then (joinCgroupForClone). Set
	// before started is sent.
	bornInCgroup bool
	// overflow fires once when a stream passes the output cap under the
	// kill policy.
	overflow chan struct{}
	// filesBroken gets the error of the workspace report's stream, if it
	// broke off or broke the protocol.
	filesBroken chan error

	// The handle (sandbox.go). ctx is the sandbox's life: cancelling it
	// (Close, or the context of Start or Exec while they run) kills it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	begun  time.Time // when the Result's clock started
	cmd    *exec.Cmd
	p      pipes
	sink   outputSink
	// timings gets the timeline (IO.Timings, or Job.Timings for Run).
	timings io.Writer
	// phaseMu guards phase, what the handle says of itself.
	phaseMu sync.Mutex
	phase   Phase
	// readyCh is closed by watch when the init says ready; execCh by
	// Exec once the payload is on its way (watch re-arms its timers).
	readyCh, execCh chan struct{}
	// watchDone is closed when watch has returned exit and runErr.
	watchDone chan struct{}
	exit      *StatusMsg
	runErr    error
	// readers are the stdout, stderr and workspace report copies of
	// one execution; filesErr is the report stream's error.
	readers  sync.WaitGroup
	filesErr error
	// execDone is closed when Exec has returned (Close waits for it).
	execDone  chan struct{}
	execBegun bool
	// initExe is the init the sandbox runs (sbx-init or sbx itself).
	initExe initbin.Exe
	// cleanups run in reverse order, once, when the sandbox is torn down.
	cleanups     []func()
	teardownOnce sync.Once
}

type compiled struct {
	f   *install.Filter
	err error
	// precompiled: f was embedded at build time, not compiled now.
	precompiled bool
}

// hostIDs returns the host uid and gid the sandbox user maps onto. An
// unprivileged caller can map only itself. Root maps the sandbox onto an
// unprivileged id of its own, never onto host root: 0x5b000000 plus 16
// bits of the (random) run id, far above login and subuid ranges. Two
// concurrent sandboxes rarely share one (1 in 65536 for a pair), and
// nothing relies on it: each has its own user, pid, mount and network
// namespaces, so a shared host uid gives neither a way to reach the other.
func hostIDs(runID string) (uid, gid int) {
	uid, gid = os.Geteuid(), os.Getegid()
	if uid != 0 {
		return uid, gid
	}
	var h uint32 = 2166136261
	for i := 0; i < len(runID); i++ {
		h = (h ^ uint32(runID[i])) * 16777619
	}
	id := RootHostIDBase + int(h&0xffff)
	return id, id
}

// RootHostIDBase is the lowest host uid a sandbox started by root runs as.
const RootHostIDBase = 0x5b000000

// watch follows the init's status lines, enforcing the timers and
// forwarding signals, until the init is reaped: it returns the exit
// message, if any, and leaves the init's wait error in s.waitErr. Nothing the init or the
// payload does stops the timers before that (issue 11, finding 2): a
// stream that stops making sense is a hard kill, and the report after the
// payload's exit ends by the wall limit plus ReportGrace.
//
// A limit ends the run in two steps: the init is asked to kill every other
// process (kill(-1) from pid 1 reaches the whole pid namespace at once,
// and blocks forks while it runs), after which it reports as usual; if it
// has not reported within killGrace, the init itself is SIGKILLed, which
// takes the whole namespace down with it.
func (s *supervisor) watch(ctx context.Context, cmd *exec.Cmd, events <-chan statusEvent, exited <-chan error) (*StatusMsg, error) {
	job := s.job
	deadline := time.NewTimer(setupTimeout)
	defer deadline.Stop()
	// phase is what the deadline timer is guarding: the start (until
	// ready), nothing while the sandbox waits for its payload, the
	// payload's start (until started), the kill (killing) or the report.
	phase := PhaseStarting
	started, killing := false, false
	var pending []int // signals for the payload, sent once it is on its way
	execCh := s.execCh
	var wall <-chan time.Time
	var wallEnd time.Time // when the wall limit passes; zero without one
	var cpuTick <-chan time.Time
	var cpuOver <-chan time.Duration // the /proc total, without a cgroup
	var exit *StatusMsg
	var stepErr, framingErr error
	reaped, ready := false, false
	done := ctx.Done()
	filesBroken := s.filesBroken
	hardKill := func() {
		if s.hardKilled {
			return
		}
		// SIGKILL to the init ends its pid namespace: the kernel kills
		// every process in it (pid_namespaces(7)); the cgroup's kill
		// gets them all at once first (cgroup.kill, or freeze and kill
		// on v1).
		s.hardKilled = true
		wall, cpuTick = nil, nil
		deadline.Stop()
		if s.cg != nil && s.attachErr == nil {
			select {
			case <-s.attached:
				s.cg.Kill()
			default:
			}
		}
		cmd.Process.Kill()
	}
	limit := func(why Status) {
		if s.killed() || s.hardKilled {
			return
		}
		s.killedFor = why
		wall, cpuTick, cpuOver = nil, nil, nil
		s.sendControl(Control{Kill: true})
		killing = true
		deadline.Reset(killGrace)
	}
	// cutReport ends a report that ran out of time or was interrupted:
	// what crossed so far stays, marked incomplete.
	cutReport := func(why string) {
		s.reportCut = true
		s.warn("workspace report cut short: " + why + "; files may be missing")
		hardKill()
	}
	// onExec: the payload is on its way; its start is timed like the
	// sandbox's was.
	onExec := func() {
		execCh = nil
		phase = PhaseRunning
		if !s.hardKilled && !killing {
			deadline.Reset(setupTimeout)
		}
		if len(pending) > 0 {
			// After the payload (ctlMu): watch must not wait for it.
			go func(sigs []int) {
				for _, n := range sigs {
					s.sendControl(Control{Signal: n})
				}
			}(pending)
			pending = nil
		}
	}
	for events != nil || !reaped {
		select {
		case <-execCh:
			onExec()
		case err := <-exited:
			s.tl.mark("sbx: init's wait returned")
			reaped, s.waitErr, exited = true, err, nil
			// Nothing of the sandbox is left to write the status pipe:
			// its EOF follows at once.
		case ev, ok := <-events:
			if execCh != nil {
				// Exec closes execCh before it sends the payload, so
				// whatever the init says of it comes after: handle it
				// first, whichever case select picked.
				select {
				case <-execCh:
					onExec()
				default:
				}
			}
			if !ok {
				s.tl.mark("sbx: status pipe closed")
				events = nil
				continue
			}
			if ev.err != nil {
				// The init never sends such a line: the stream, and
				// whatever follows on it, cannot be trusted.
				framingErr = ev.err
				s.aborted = abortFraming
				hardKill()
				continue
			}
			m := ev.msg
			s.tl.add(m.Marks)
			s.tl.mark("sbx: got " + string(m.Kind))
			switch m.Kind {
			case kindError:
				stepErr = withHint(m.stepError())
			case kindWarning:
				s.warn(m.Msg)
			case kindReady:
				if ready || phase > PhaseRunning || s.hardKilled {
					continue
				}
				ready = true
				if phase == PhaseStarting {
					// Confined and waiting: no timer runs until Exec.
					phase = PhaseReady
					deadline.Stop()
				}
				// Otherwise an early payload (Run) is on its way
				// already: its start stays timed (onExec).
				close(s.readyCh)
			case kindStarted:
				if phase != PhaseRunning || started || killing {
					continue
				}
				started = true
				deadline.Stop()
				s.takeCPUBase()
				if job.WarmResultJSON {
					go s.warmResultJSON()
				}
				if s.cg != nil {
					// Stale groups of a SIGKILLed sbx go now, off the
					// start-up path; groups in use are flock'ed and kept.
					go cgroup.CleanupStale()
				}
				if job.Timeout > 0 {
					wallEnd = time.Now().Add(job.Timeout)
					wall = time.After(job.Timeout)
				}
				if job.Limits.CPUTime > 0 && s.cg != nil {
					// The total CPU of every process, from the
					// group's usage: a cheap pread every 20 ms.
					t := time.NewTicker(20 * time.Millisecond)
					defer t.Stop()
					cpuTick = t.C
				} else if job.Limits.CPUTime > 0 || s.pidsByRlimit() {
					// No cgroup: the total from /proc (cputotal_linux.go),
					// which also samples the tasks for RLIMIT_NPROC's
					// evidence (evidence.go).
					stop := make(chan struct{})
					defer close(stop)
					var err error
					if cpuOver, err = s.watchCPUTotal(cmd.Process.Pid, cpuLimitOrNone(job.Limits.CPUTime), stop); err != nil {
						stepErr = err
						hardKill()
					}
				}
			case kindExit:
				if exit != nil || s.hardKilled {
					continue
				}
				mm := m
				exit = &mm
				// The payload is done: a late timer must not turn its
				// exit into a timeout. What is left is the report.
				wall, cpuTick, cpuOver = nil, nil, nil
				phase, killing = PhaseReporting, false
				s.setPhase(PhaseReporting)
				deadline.Reset(reportBudget(time.Now(), wallEnd))
			}
		case <-deadline.C:
			switch {
			case killing:
				hardKill()
			case phase == PhaseStarting || phase == PhaseRunning && !started:
				s.aborted = abortSetup
				hardKill()
			case phase == PhaseReporting:
				cutReport(fmt.Sprintf("it ran past its time (at most %v, and no later than %v after the wall-clock limit)", reportTimeout, ReportGrace))
			default:
				hardKill()
			}
		case <-wall:
			limit(StatusTimeout)
		case used := <-cpuOver:
			cpuOver = nil
			s.cpuAtKill = used
			limit(StatusCPULimit)
		case <-cpuTick:
			if used, err := s.cg.CPUUsage(); err == nil && used-s.base.user-s.base.sys >= job.Limits.CPUTime {
				used -= s.base.user + s.base.sys
				cpuTick = nil
				s.cpuAtKill = used
				limit(StatusCPULimit)
			}
		case <-filesBroken:
			// Nothing more of the report can be trusted or received: end
			// it now (the run's warning says why, see run).
			filesBroken = nil
			if !reaped && !s.hardKilled {
				s.reportCut = true
				hardKill()
			}
		case <-s.overflow:
			s.overflow = nil
			if phase != PhaseReporting && !killing {
				limit(StatusOutputLimit)
			}
		case <-done:
			done = nil
			if !s.killed() {
				s.aborted = abortCancel
			}
			hardKill()
		case sig := <-job.Signals:
			n, ok := sig.(syscall.Signal)
			switch {
			case !ok || s.hardKilled:
			case phase == PhaseReporting:
				// No payload is left to get it: the signal is for sbx,
				// which must not wait out the report.
				cutReport("sbx got " + unix.SignalName(n))
			case phase < PhaseRunning:
				// Nothing on the control pipe may come before the
				// payload: the init reads the payload next.
				pending = append(pending, int(n))
			default:
				s.sendControl(Control{Signal: int(n)})
			}
		}
	}
	switch {
	case framingErr != nil:
		return nil, fmt.Errorf("sbx init: %w; the sandbox was killed", framingErr)
	case stepErr != nil:
		return nil, stepErr
	case s.aborted == abortSetup && exit == nil:
		return nil, fmt.Errorf("sandbox setup took longer than %v", setupTimeout)
	case s.aborted == abortCancel && exit == nil:
		return nil, fmt.Errorf("%w: %v", errCanceled, context.Cause(ctx))
	}
	return exit, nil
}

// reportBudget is how long the workspace report may take once the payload
// exited at now: reportTimeout, and never past the wall limit (wallEnd,
// zero without one) plus ReportGrace.
func reportBudget(now, wallEnd time.Time) time.Duration {
	d := reportTimeout
	if !wallEnd.IsZero() {
		if left := wallEnd.Add(ReportGrace).Sub(now); left < d {
			d = left
		}
	}
	return max(d, 0)
}

// destroyCgroup removes the sandbox's cgroup once the run is over. When
// the init ended by itself its pid namespace took every process with it
// and the group is empty; after a hard kill, or a failed start, the
// group's own kill makes sure.
func (s *supervisor) destroyCgroup() {
	<-s.cgReady
	if s.cg == nil {
		return
	}
	if s.hardKilled || s.cgErr != nil || s.attachErr != nil || s.confineErr != nil {
		s.cg.Kill()
	}
	if err := s.cg.Destroy(); err != nil {
		s.cg.Kill()
		if err = s.cg.Destroy(); err != nil {
			s.warn(fmt.Sprintf("cgroup cleanup: %v (the next sbx removes it)", err))
		}
	}
}

// warn records a warning for the Result; safe from any goroutine.
func (s *supervisor) warn(msg string) {
	s.warnMu.Lock()
	s.warnings = append(s.warnings, msg)
	s.warnMu.Unlock()
}

// attachInit puts the init into the sandbox's cgroup. On cgroup v2 it was
// born there (CLONE_INTO_CGROUP), and on v1 too when the thread that
// cloned it had moved itself in (joinCgroupForClone). Otherwise (v1 on a
// kernel before 5.17, or the move failed) the attach is written now,
// while the init sets up: it can wait out an RCU grace period
// (milliseconds) that would otherwise add to every start.
func (s *supervisor) attachInit(pid int) {
	go func() {
		defer close(s.attached)
		<-s.cgReady
		// Before the payload exists: it is forked once attached closes.
		s.openCPUClock(pid)
		if s.cgErr != nil {
			s.attachErr = s.cgErr
			return
		}
		if s.cg == nil {
			return
		}
		if s.bornInCgroup {
			return
		}
		if err := s.cg.Attach(pid); err != nil {
			s.attachErr = fmt.Errorf("attach the init to its cgroup: %w", err)
			s.tl.mark("sbx: cgroup attach failed")
			return
		}
		s.tl.mark("sbx: init attached to its cgroup")
	}()
}

// cloneIntoCgroupWorks: clone3 takes a cgroup (CLONE_INTO_CGROUP) from
// Linux 5.7; before it, clone_args has no cgroup field (E2BIG) or there
// is no clone3 at all (5.3, ENOSYS), and os/exec's clone with
// UseCgroupFD fails the start. There the init on cgroup v2 is attached
// while it sets up, as on v1 before 5.17 (attachInit), and its payload
// is forked only once the attach is done.
var cloneIntoCgroupWorks = sync.OnceValue(func() bool { return kernel.AtLeast(5, 7) })

// selfMoveSkipsLock: a thread moving itself into a v1 cgroup skips the
// global cgroup_threadgroup_rwsem from Linux 5.17 (commit 9a3284fad42f;
// backported to some stable trees, which this check does not see: they
// keep the attach). Before it, the move would wait out the same RCU grace
// period as the attach, on the clone's critical path instead of beside
// the init's start-up.
var selfMoveSkipsLock = sync.OnceValue(func() bool { return kernel.AtLeast(5, 17) })

// joinCgroupForClone moves the calling thread, the locked one about to
// clone the init, into the sandbox's cgroup in every v1 hierarchy, so
// that the init is born there (cgroup.JoinThread). It waits for the
// cgroup to exist (cgReady). nil, nil: nothing to join (no cgroup, v2,
// an old kernel) or the move failed and was undone, and attachInit
// attaches the init after the clone as before. An error means the thread
// is stuck inside (cgroup.ErrThreadInside): it must not clone anything.
func (s *supervisor) joinCgroupForClone() (*cgroup.ThreadMove, error) {
	if s.cgBeforeClone || !selfMoveSkipsLock() {
		return nil, nil
	}
	<-s.cgReady
	if s.cgErr != nil || s.cg == nil || s.cg.Mode() != cgroup.ModeV1 {
		return nil, nil
	}
	s.tl.mark("sbx: clone waited for the cgroup (mkdir, limits)")
	if unix.Gettid() == unix.Getpid() {
		// The main thread (possible for an unprivileged sbx, whose start
		// goroutine is locked wherever it ran: nsOwner.onThread avoids it
		// for root) could not end if its move back failed: Go wedges a
		// locked main thread instead.
		s.tl.mark("sbx: the init is attached after its clone (cloned from the main thread)")
		return nil, nil
	}
	m, err := s.cg.JoinThread()
	if errors.Is(err, cgroup.ErrThreadInside) {
		return nil, &threadInsideError{tid: unix.Gettid(), err: fmt.Errorf("move the thread that clones the init into its cgroup: %w", err)}
	}
	if err != nil {
		s.tl.mark("sbx: cgroup join failed, the init is attached after its clone (" + err.Error() + ")")
		return nil, nil
	}
	s.bornInCgroup = true
	s.tl.mark("sbx: clone thread moved into the cgroup")
	return m, nil
}

// leaveCgroupAfterClone moves the calling thread back out of the
// sandbox's cgroup once the init is cloned (m from joinCgroupForClone;
// nil: nothing to do). An error means the thread is still inside.
func (s *supervisor) leaveCgroupAfterClone(m *cgroup.ThreadMove) error {
	if m == nil {
		return nil
	}
	if err := m.LeaveThread(); err != nil {
		return &threadInsideError{tid: unix.Gettid(), err: fmt.Errorf("move the thread that cloned the init back out of its cgroup: %w", err)}
	}
	s.tl.mark("sbx: clone thread moved back out of the cgroup")
	return nil
}

// threadInsideError: a thread of sbx is stuck in the sandbox's cgroup.
// The run fails with it; the thread, never unlocked, ends with its
// goroutine, and the start waits for that (awaitGone) before anything
// kills or removes the cgroup, so that sbx itself is never in it then.
type threadInsideError struct {
	tid int
	err error
}

func (e *threadInsideError) Error() string { return e.err.Error() }
func (e *threadInsideError) Unwrap() error { return e.err }

// awaitGone waits (up to 2 s) until the thread has exited: tgkill with
// signal 0 fails with ESRCH (tgkill(2)).
func (e *threadInsideError) awaitGone() {
	deadline := time.Now().Add(2 * time.Second)
	for unix.Tgkill(unix.Getpid(), e.tid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}

// withProxyEnv points HTTP clients at the proxy, unless the profile or a
// flag already set a variable; noProxy (the sandbox's own addresses) stays
// direct.
func withProxyEnv(env []string, noProxy string) []string {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	url := "http://" + ProxyAddr
	for _, kv := range [][2]string{
		{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"ALL_PROXY", url}, {"NO_PROXY", noProxy},
		{"http_proxy", url}, {"https_proxy", url}, {"all_proxy", url}, {"no_proxy", noProxy},
	} {
		if !set[kv[0]] {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return env
}

func (s *supervisor) initCmd(p *pipes) *exec.Cmd {
	spec := &s.job.Spec
	uid, gid := hostIDs(spec.ID)
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: spec.UID, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: spec.GID, HostID: gid, Size: 1}},
		AmbientCaps: initCaps,
		Pdeathsig:   syscall.SIGKILL,
		Setsid:      true,
	}
	if s.cgBeforeClone && s.cg != nil && cloneIntoCgroupWorks() {
		if fd, ok := s.cg.FD(); ok {
			// Born in its cgroup: no attach, no window outside it
			// (clone3 CLONE_INTO_CGROUP, Linux 5.7).
			attr.UseCgroupFD, attr.CgroupFD = true, fd
			s.bornInCgroup = true
		}
	}
	if os.Geteuid() == 0 {
		// Root may allow setgroups in the new namespace (it holds
		// CAP_SETGID above it), which lets the child drop root's
		// supplementary groups before it becomes the sandbox user.
		// Unprivileged callers must deny it (user_namespaces(7),
		// CVE-2014-8989) and keep theirs.
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	}
	extra := []*os.File{p.ctlR, p.stW, p.filesW}
	if p.proxyW != nil || p.sessW != nil {
		extra = append(extra, p.proxyW) // nil: the init's fd 6 is closed
	}
	if p.sessW != nil {
		extra = append(extra, p.sessW)
	}
	return &exec.Cmd{
		Path:        s.initExe.Path,
		Args:        []string{s.initExe.Argv0(), initArg},
		Env:         s.initEnviron(),
		Stdin:       p.inR,
		Stdout:      p.outW,
		Stderr:      p.errW,
		ExtraFiles:  extra,
		SysProcAttr: attr,
	}
}

// readErr remembers the error of its reader, to tell a failing source
// from a failing destination after io.Copy.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil {
		r.err = err
	}
	return n, err
}

func (s *supervisor) sendControl(c Control) {
	b, err := encodeCtl(ctlMsg{Kind: ctlControl, Control: &c})
	if err != nil {
		return
	}
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.ctlW.Write(b)
}

// statusEvent is one status line, decoded, or the error that ended the
// stream (a framing error, or the pipe's own).
type statusEvent struct {
	msg StatusMsg
	err error
}

// readStatus decodes the init's status lines until EOF. A line that is
// too long or not a message of the init is sent as an error and ends the
// decoding, but not the reading: the rest is discarded, so the init never
// blocks on a pipe nobody reads (issue 11, finding 2).
func readStatus(r io.Reader, out chan<- statusEvent) {
	defer close(out)
	defer io.Copy(io.Discard, r)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readStatusLine(br, maxStatusLine)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The init is gone; a line it was cut off in is lost with it.
			return
		}
		var m StatusMsg
		if err == nil {
			m, err = decodeStatus(line)
		}
		if err != nil {
			out <- statusEvent{err: err}
			return
		}
		out <- statusEvent{msg: m}
	}
}

// openInputs opens every input file with the caller's own rights and
// fixes its size; the bytes are streamed, never bind-mounted.
func openInputs(files []File) ([]*os.File, error) {
	var out []*os.File
	for i := range files {
		f, err := openInput(files[i])
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("input %s: %w", files[i].Source, unwrapPath(err))
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			f.Close()
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("input %s: %w", files[i].Source, err)
		}
		files[i].Size = fi.Size()
		if files[i].Mode == 0 {
			files[i].Mode = 0o644
		}
		out = append(out, f)
	}
	return out, nil
}

// openInput opens one input file: Source, or Data's file again. Data is
// reopened through its /proc/self/fd link (proc(5): the link opens the
// file even once unlinked) for a file offset of its own, as reading it
// moves none of the caller's. O_NOFOLLOW: a Source listed as a regular
// file must not become a link to something else before it is read (a
// Data link is sbx's own fd, and O_NOFOLLOW would refuse it).
func openInput(f File) (*os.File, error) {
	if f.Data != nil {
		return os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Data.Fd()), os.O_RDONLY|unix.O_NONBLOCK, 0)
	}
	return os.OpenFile(f.Source, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
}

// unwrapPath is oserr.WithoutPath: the error without the path that the
// message already names.
func unwrapPath(err error) error { return oserr.WithoutPath(err) }
