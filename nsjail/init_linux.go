package nsjail

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// IsInit reports whether this process was re-executed by the supervisor
// to be a sandbox's init: argv[1] says so and it is pid 1 of its own pid
// namespace. main (and TestMain) must check this before anything else.
func IsInit() bool {
	return len(os.Args) == 2 && os.Args[1] == initArg && os.Getpid() == 1
}

func init() {
	if IsInit() {
		// Locked from a package init, main.main (or TestMain) runs on the
		// process's main thread (runtime.LockOSThread), so the thread Init
		// confines is the thread group's leader: /proc/1/status, which
		// the tests and a reader of /proc see, is the confined thread's.
		runtime.LockOSThread()
	}
}

// Init runs the sandbox's init and never returns. It must be called on the
// main goroutine before anything else runs.
func Init() {
	// The thread's credentials, no_new_privs and (later) seccomp filter are
	// what the payload inherits, so this goroutine stays on one OS thread
	// for good (runc's standard_init_linux.go does the same).
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	ctl := os.NewFile(controlFD, "control")
	in := &initProc{status: status, ctl: bufio.NewReaderSize(ctl, 64<<10), payloadPid: -1}
	in.tl.on.Store(true) // dropped unless the payload asks for timings
	in.tl.mark("init: runtime started")
	ends := supervisorEndsNow()
	code := in.run()
	closeSupervisorEnds(ends)
	os.Exit(code)
}

// supervisorFDs are the fds the supervisor hands the init, its ends of
// the supervisor's pipes and sockets (wire.go): the payload's stdio as
// the init's own 0-2, control, status, files, proxy, session.
var supervisorFDs = [...]int{0, 1, 2, controlFD, statusFD, filesFD, proxyFD, sessionFD}

// fileID is what an fd refers to: its file's device and inode.
type fileID struct {
	dev, ino uint64
	open     bool
}

// supervisorEndsNow is what each of supervisorFDs refers to at the
// init's start, before anything of its own can take their numbers.
func supervisorEndsNow() (ids [len(supervisorFDs)]fileID) {
	for i, fd := range supervisorFDs {
		ids[i] = fileOf(fd)
	}
	return ids
}

// fileOf is fd's fileID; not open when fstat(2) fails (EBADF).
func fileOf(fd int) fileID {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return fileID{}
	}
	return fileID{dev: st.Dev, ino: st.Ino, open: true}
}

// closeSupervisorEnds closes the init's ends of every pipe and socket the
// supervisor reads or writes (supervisorFDs) that it still holds, as its
// last act before exit_group. An fd the init closed on the way (the
// proxy's, the report's) may since have been reused by one of its own
// files (the seccomp listener, the workspace, an eventfd): only an fd
// that still refers to the file it did at the start (ends) is closed. Left to the exit,
// the kernel releases them only with the last thread's file table, after
// exit_mm, and the final fput of each runs as task work after
// exit_task_namespaces, the mount namespace's teardown (kernel/exit.c,
// do_exit): the supervisor's EOFs came ~1 ms after the payload's report,
// now at once, and it collects the outputs meanwhile. Raw close(2), not
// os.File.Close: that one waits for a read in flight on the control pipe
// (readControl), and nothing may run after it but the exit.
func closeSupervisorEnds(ends [len(supervisorFDs)]fileID) {
	for i, fd := range supervisorFDs {
		if ends[i].open && fileOf(fd) == ends[i] {
			unix.Close(fd)
		}
	}
}

// startWarmWire starts warmWire in a goroutine of its own, once the Spec
// is decoded: the warm-up then runs while the mount plan's thread is in
// its syscalls (~1 ms; the init has one P, initEnv)
// and is usually done before the "ready" line (if not, that encode
// builds the caches itself, as without it). It used to start with the
// runtime, beside the Spec's decode, and made that decode slower on the
// main thread (both are encoding/json's cold first uses, on 2 CPUs
// shared with the supervisor): started here instead, "read spec"
// ended 0.085 ms (root) and 0.055 ms (uid 65534) sooner and "got
// ready" 0.11 and 0.185 ms sooner (SCHED_FIFO, 100 interleaved rounds;
// issue 13, "The init's start, sixth pass" in docs/DESIGN.md).
func (in *initProc) startWarmWire() error {
	go in.warmWire()
	return nil
}

// warmWire fills encoding/json's per-type caches for the status line
// while the main goroutine mounts. A
// type's first use reflects over it and every type it reaches
// (cachedTypeFields builds each field's encoder, recursively) and
// allocates what it finds; for StatusMsg that first use was the "ready"
// line, on the path to the payload: "sbx: got ready" came 0.5-0.65 ms after
// the filter's load, 0.16-0.24 ms with the warm-up (issue 13, "the init's start" in
// docs/DESIGN.md). The control messages need no warming: the Confine's
// and the Payload's lines decode in a few µs once the Spec's has (their
// types share Rlimit and ctlMsg with it). Only the caches change: the
// bytes sent are the same.
func (in *initProc) warmWire() {
	json.Marshal(&StatusMsg{})
	in.tl.mark("init: status line's JSON types warmed")
}

type initProc struct {
	status     *os.File
	ctl        *bufio.Reader
	spec       Spec
	payloadPid int
	tl         timeline
	// timings: the payload asked for the init's marks (Payload.Timings).
	timings bool
	// environ is the payload's environment: the Spec's, with the
	// payload's additions (Payload.Env).
	environ []string
	// inputs maps each input's workspace path to the sha256 of what was
	// written, to tell modified inputs from unchanged ones afterwards.
	inputs map[string]string
	// inputBytes is their total size: the walk's bounds grow with it.
	inputBytes int64
	// denials counts what the seccomp filter refused; nil without one.
	denials *denialServer
	// limits are the payload's rlimits, set on it while the seccomp
	// hold stops it before its execve; nil when the init set them on
	// itself (no listener).
	limits *payloadLimits
	// payloadRlimits are the payload's rlimits, hold or not.
	payloadRlimits []Rlimit
	// warm is the waiting interpreter of a warm sandbox (init_warm_linux.go);
	// warmBase what its preload used, left out of the payload's usage.
	warm, warmBase *warmProc
	// report reads the Python runner's report, taken for Result.Error
	// and Result.Results once the payload is gone (init_warm_linux.go,
	// init_report_linux.go); nil without.
	report *reportReader
	// planMarks and maskMarks are the mount plan's and the /proc masks'
	// steps for the timeline, named only when sent (init_marks_linux.go).
	planMarks, maskMarks mountMarks
}

// step is one named action of the init; the name is what the host prints
// when it fails.
type step struct {
	name string
	fn   func() error
}

func (in *initProc) run() int {
	// None of the pipes may reach the payload.
	unix.CloseOnExec(controlFD)
	unix.CloseOnExec(statusFD)
	unix.CloseOnExec(filesFD)
	unix.CloseOnExec(proxyFD)   // EBADF without a proxy; harmless
	unix.CloseOnExec(sessionFD) // EBADF without a session; passed by name below
	unix.Umask(0o022)
	// Bringing lo up needs nothing from the Spec: it runs beside the
	// mounts, on another thread of the same network namespace.
	loUp := make(chan error, 1)
	go func() { loUp <- bringLoopbackUp() }()
	var fds []int
	steps := []step{
		{"ignore signals", ignoreSignals},
		{"prctl PR_SET_DUMPABLE", setNotDumpable},
		{"read spec", in.readSpec},
		{"start status line's JSON warm-up", in.startWarmWire},
		{"mount --make-rprivate /", makeRootPrivate},
		{"open bind sources", func() (err error) { fds, err = openBindSources(in.spec.Mounts); return }},
		{"mount staging root", mountStagingRoot},
		{"mount plan", func() error { return in.applyPlan(fds) }},
		{"pivot_root", pivotRoot},
		{"chdir workdir", func() error { return unix.Chdir(in.spec.Workdir) }},
		{"sethostname", func() error { return setHostname(in.spec.Hostname) }},
		{"lo up", func() error { return <-loUp }},
		{"dns stub and forward listeners", in.handOverEgress},
		{"proxy listener", in.handOverProxyListener},
		{"user.max_user_namespaces=0", forbidNestedUserNS},
	}
	steps = append(steps, userNSQuotaSteps()...)
	// Last of the mounts: mount(2) is refused once the filter is on, and
	// the quotas above are /proc/sys writes that the masks may freeze.
	steps = append(steps, step{"mask /proc", in.maskProc})
	if err := in.runSteps(steps); err != nil {
		return 1
	}
	closeAll(fds)

	// Confined before it waits (issue 12): the init drops everything and
	// loads the payload's filter before it says ready, so a sandbox that
	// waits for its payload waits confined, and so does everything the
	// init still does for it (postConfineSyscalls lists what that is).
	var confine Confine
	steps = []step{{"read confine", func() error { return in.readConfine(&confine) }}}
	if err := in.runSteps(steps); err != nil {
		return 1
	}
	listener := -1
	in.limits = &payloadLimits{rl: append(append([]Rlimit{}, in.spec.Rlimits...), confine.Rlimits...)}
	in.payloadRlimits = in.limits.rl
	core, rest := splitCore(in.limits.rl)
	steps = []step{
		// The init itself takes only RLIMIT_CORE (harmless: it is not
		// dumpable), which no filtered thread may change later; the rest
		// go to the payload alone (init_rlimits_linux.go).
		{"setrlimit RLIMIT_CORE", func() error { return setRlimits(core) }},
		{"forget Go's RLIMIT_NOFILE restore", forgetNofileRestore},
		{"close_range CLOEXEC", closeExtraFDs},
		{"clear ambient caps", clearAmbientCaps},
		{"lock securebits", lockSecurebits},
		{"drop bounding set", dropBoundingSet},
		{"set no_new_privs", setNoNewPrivs},
		{"landlock_restrict_self", func() error { return landlockRestrictSelf(&in.spec) }},
		{"clear capabilities", clearCapSets},
		// Last: from here on this thread runs under the filter, and so
		// does the payload it forks (seccomp(2): inherited by children).
		{"load seccomp filter", func() (err error) { listener, err = loadSeccomp(confine.Seccomp); return }},
	}
	if err := in.runSteps(steps); err != nil {
		return 1
	}
	in.startDenialServer(confine.Seccomp, listener)
	if in.spec.Warm != nil {
		// The interpreter waits confined, as the payload's process.
		selfLimits := []Rlimit(nil)
		if listener < 0 {
			selfLimits = rest
		}
		if err := in.runSteps([]step{{"start warm interpreter", func() error { return in.startWarm(selfLimits) }}}); err != nil {
			return 1
		}
	}
	// Whether the marks are wanted is the payload's to say: they are
	// kept until then (a hundred at most) and go with "started".
	in.send(StatusMsg{Kind: kindReady})

	var p Payload
	steps = []step{
		{"read payload", func() error { return in.readPayload(&p) }},
		{"write inputs", func() error { return in.writeInputs(p.Files) }},
	}
	if err := in.runSteps(steps); err != nil {
		return 1
	}
	argv0, err := lookPath(p.Argv[0], in.env("PATH"))
	if in.warm != nil && (err != nil || !in.takesWarm(argv0, &p)) {
		in.dropWarm()
	}
	if p.Lower != nil && len(p.Lower.Rlimits) > 0 && in.warm == nil {
		// A cold payload takes its lowered rlimits at its hold, or
		// from the init below.
		in.payloadRlimits = lowerRlimits(in.payloadRlimits, p.Lower.Rlimits)
		_, rest = splitCore(in.payloadRlimits)
		if in.limits != nil {
			in.limits.rl = in.payloadRlimits
		}
	}
	if err != nil {
		// Not a sandbox failure: the payload's program is missing.
		in.send(StatusMsg{Kind: kindExit, ExecErrno: execErrno(err), Msg: err.Error(), Marks: in.takeMarks()})
		in.reportFiles()
		return 0
	}
	if listener < 0 {
		// No listener, no hold: the payload inherits the init's limits,
		// set as late as can be, so that the inputs are written without
		// them.
		steps = []step{{"setrlimit (payload's limits, on the init: no seccomp listener)", func() error { return setRlimits(rest) }}}
		if err := in.runSteps(steps); err != nil {
			return 1
		}
		in.limits = nil
	}
	code := in.supervise(argv0, &p)
	if code == 0 {
		in.reportFiles()
	}
	return code
}

func (in *initProc) runSteps(steps []step) error {
	for _, s := range steps {
		err := s.fn()
		in.tl.mark("init: " + s.name)
		if err != nil {
			m := stepErrorMsg(s.name, "", err)
			var pe *pathError
			if errors.As(err, &pe) {
				m.Path = trimStaging(pe.path)
			}
			in.send(m)
			return err
		}
	}
	return nil
}

// send writes one status line; the supervisor being gone is not an error
// the init can do anything about.
func (in *initProc) send(m StatusMsg) {
	b, err := encodeLine(m)
	if err == nil {
		in.status.Write(b)
	}
}

// handOverProxyListener opens the proxy's socket in the sandbox's network
// namespace and passes it to the supervisor, which accepts on it.
func (in *initProc) handOverProxyListener() error {
	if !in.spec.Proxy {
		return nil
	}
	defer unix.Close(proxyFD)
	fd, err := listenProxy()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return sendFD(proxyFD, fd)
}

func (in *initProc) takeMarks() []Mark {
	if !in.timings {
		return nil
	}
	// Locked: warmWire marks from its own goroutine.
	in.tl.mu.Lock()
	defer in.tl.mu.Unlock()
	m := in.tl.marks
	in.tl.marks = nil
	m = in.planMarks.appendTo(m)
	m = in.maskMarks.appendTo(m)
	in.planMarks, in.maskMarks = mountMarks{}, mountMarks{}
	return m
}

func (in *initProc) readSpec() error {
	m, err := expect(in.ctl, ctlSpec)
	if err != nil {
		return err
	}
	in.spec = *m.Spec
	return in.spec.Validate()
}

func (in *initProc) applyPlan(fds []int) error {
	in.planMarks = newMountMarks(in.spec.Mounts)
	for i, m := range in.spec.Mounts {
		if err := applyMount(m, fds[i]); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		in.planMarks.done(i)
	}
	return nil
}

// readConfine reads what the init loads last, and checks it against the
// Spec: a policy named there must come with its filter (fail closed).
func (in *initProc) readConfine(c *Confine) error {
	m, err := expect(in.ctl, ctlConfine)
	if err != nil {
		return err
	}
	*c = *m.Confine
	// Every run has a filter: under "none" the init guard alone, which
	// keeps the payload from reaching the init (seccomp.ForRun).
	want := in.spec.Seccomp
	if want == policyname.None {
		want = policyname.Guard
	}
	if c.Seccomp == nil {
		return fmt.Errorf("seccomp policy %q but no filter", in.spec.Seccomp)
	}
	if c.Seccomp.Policy != want {
		return fmt.Errorf("seccomp filter for policy %q, want %q", c.Seccomp.Policy, want)
	}
	return checkRlimits(c.Rlimits)
}

func (in *initProc) readPayload(p *Payload) error {
	m, err := expect(in.ctl, ctlPayload)
	if err != nil {
		return err
	}
	*p = *m.Payload
	if err := CheckPayload(p); err != nil {
		return err
	}
	// The request's own settings (Payload.Env, Send, Timings).
	in.environ = withEnv(in.spec.Env, p.Env)
	in.spec.Outputs.Send = p.Send
	in.timings = p.Timings
	in.tl.on.Store(p.Timings)
	if !p.Timings {
		in.tl.mu.Lock() // warmWire marks from its own goroutine
		in.tl.marks = nil
		in.tl.mu.Unlock()
	}
	return nil
}

// withEnv is base with extra's variables set: a key of extra replaces
// base's in place, a new one is appended (as profiles.mergeEnv merges).
func withEnv(base, extra []string) []string {
	out := append([]string{}, base...)
	idx := make(map[string]int, len(out))
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// writeInputs streams each input file from the control pipe into the
// workspace. The workspace is a fresh tmpfs nobody else has touched yet,
// so plain path walks are safe here; O_EXCL|O_NOFOLLOW still refuse any
// surprise.
func (in *initProc) writeInputs(files []File) error {
	in.inputs = make(map[string]string, len(files))
	for _, f := range files {
		dst := filepath.Join(in.spec.Workdir, f.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return &pathError{"mkdir", filepath.Dir(dst), err}
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, os.FileMode(f.Mode&0o777))
		if err != nil {
			return &pathError{"create", dst, err}
		}
		h := sha256.New()
		_, err = io.CopyN(io.MultiWriter(out, h), in.ctl, f.Size)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &pathError{"write", dst, err}
		}
		in.inputs[f.Path] = hex.EncodeToString(h.Sum(nil))
		in.inputBytes += f.Size
	}
	return nil
}

// closeExtraFDs marks every fd above stderr close-on-exec, whatever the
// init may have inherited or opened, so the payload starts with exactly
// fds 0, 1 and 2 (close_range(2), CLOSE_RANGE_CLOEXEC, Linux 5.11).
func closeExtraFDs() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return closeExtraFDsSlow()
	}
	if err != nil {
		return fmt.Errorf("close_range(3, ~0, CLOSE_RANGE_CLOEXEC): %w", err)
	}
	return nil
}

func closeExtraFDsSlow() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

func (in *initProc) env(key string) string {
	for _, kv := range in.environ {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

var (
	errNotFound   = errors.New("not found")
	errCannotExec = errors.New("cannot execute")
)

// lookPath resolves argv[0] in the sandbox's PATH the way execvp does.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, checkExecutable(file)
	}
	var firstErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && errors.Is(err, errCannotExec) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%s: %w in PATH %s", file, errNotFound, path)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, errNotFound)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory: %w", p, errCannotExec)
	}
	if err := unix.Access(p, unix.X_OK); err != nil {
		return fmt.Errorf("%s: %v: %w", p, err, errCannotExec)
	}
	return nil
}

func execErrno(err error) int {
	if errors.Is(err, errNotFound) {
		return int(unix.ENOENT)
	}
	return int(unix.EACCES)
}

// supervise starts the payload, forwards the supervisor's signals to it,
// reaps every process of the sandbox, and reports the payload's status.
func (in *initProc) supervise(argv0 string, p *Payload) int {
	if in.warm == nil && p.CaptureError && pythonArgv(p.Argv) && argvBytes(p.Argv) <= maxRunnerArgv {
		// A cold Python payload starts through its runner, which
		// reports its uncaught exception.
		if err := in.startRunner(p.Argv[0], argv0, p.Argv); err != nil {
			killAll()
			in.send(stepErrorMsg("start the Python runner", "", err))
			return 1
		}
	}
	if in.warm != nil {
		pid, err := in.handOff(p)
		if err != nil {
			killAll()
			in.send(stepErrorMsg("hand the payload to the warm interpreter", "", err))
			return 1
		}
		return in.reap(pid)
	}
	files := []uintptr{0, 1, 2}
	if in.spec.Session {
		// The session driver's channel, its fd 3; it keeps it from
		// what it runs (session_driver.py).
		files = append(files, sessionFD)
	}
	pid, err := forkExecOnTwoPs(argv0, p.Argv, &syscall.ProcAttr{
		Dir:   in.spec.Workdir,
		Env:   in.environ,
		Files: files,
		// A new session: the payload has no controlling terminal, so
		// TIOCSTI and friends have nothing to act on (CVE-2017-5226).
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if in.limits != nil {
		// Fail closed: the payload must be the process that was held
		// and limited.
		held, herr := in.limits.heldPid()
		if herr == nil && err == nil && held != pid {
			herr = fmt.Errorf("pid %d started, but the process held before its execve was pid %d", pid, held)
		}
		if herr != nil {
			killAll()
			in.send(stepErrorMsg("setrlimit (payload's limits)", "", herr))
			return 1
		}
	}
	if err != nil {
		// ENOENT: not found (127); anything else: cannot run (126).
		errno := unix.EACCES
		if errors.Is(err, unix.ENOENT) {
			errno = unix.ENOENT
		}
		in.send(StatusMsg{Kind: kindExit, ExecErrno: int(errno), Msg: fmt.Sprintf("exec %s: %v", argv0, err)})
		return 0 // the caller reports the workspace
	}
	return in.reap(pid)
}

// reap reports the payload's start, forwards the supervisor's signals to
// it, reaps every process of the sandbox, and reports the payload's status.
func (in *initProc) reap(pid int) int {
	in.payloadPid = pid
	in.tl.mark("init: fork+exec payload")
	in.waitOnOneP()
	in.send(StatusMsg{Kind: kindStarted, Pid: pid, Marks: in.takeMarks()})
	go in.readControl()

	var payloadStatus unix.WaitStatus
	tasks := 0
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			break
		}
		if err != nil {
			in.send(stepErrorMsg("wait4", "", err))
			killAll()
			return 1
		}
		if wpid == pid {
			payloadStatus = ws
			// Before the kill: the evidence of RLIMIT_NPROC (the
			// payload, reaped already, counts as one).
			tasks = countTasks() + 1
			// The payload is gone: nothing of the run may outlive it, a
			// double-forked daemon included.
			killAll()
		}
	}
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	m := StatusMsg{
		Kind:       kindExit,
		WaitStatus: uint32(payloadStatus),
		UserUS:     ru.Utime.Sec*1e6 + ru.Utime.Usec,
		SystemUS:   ru.Stime.Sec*1e6 + ru.Stime.Usec,
		MaxRSSKB:   ru.Maxrss,
		Tasks:      tasks,
	}
	in.subtractWarmBase(&m)
	rep := in.readReport()
	m.PyError, m.Figures, m.FiguresCut = rep.err, rep.figures, rep.figuresCut
	if in.denials != nil {
		c := in.denials.stop()
		m.Denials, m.DenialsOther, m.DenialsKnown = c.byNr, c.other, c.known
		m.FilterKilled = c.killed[pid]
		m.Filtered = true
	}
	in.send(m)
	return 0
}

// forkExecOnTwoPs is syscall.ForkExec with a second P for the fork's
// length. The init runs on one P (initEnv), but a fork needs two: the
// raw vfork keeps its P until the child's execve, and before that the
// child's setsid is held by the filter until the denial server, a
// goroutine, sets the payload's rlimits on it (seccomp.ActHold), which
// needs a P of its own (TestInitOnOneCPU deadlocked at its 30 s setup
// timeout without it). Back to one as soon as the child has exec'd: the
// second P then dies having run little beyond the hold, so its mcache
// hands few spans back (issue 13, twelfth pass: with two Ps from the
// runtime's start, the GOMAXPROCS(1) after the execve handed back the
// spans of everything the second P had run, ~75 page faults per run in
// fresh span-set blocks, runtime.(*spanSet).push).
func forkExecOnTwoPs(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	runtime.GOMAXPROCS(2)
	pid, err := syscall.ForkExec(argv0, argv, attr)
	runtime.GOMAXPROCS(1)
	return pid, err
}

// waitOnOneP leaves the init one P (GOMAXPROCS 1) once the payload has
// exec'd (forkExecOnTwoPs has already; a warm sandbox's hand-off forks
// nothing): from here on the init only waits (wait4, the control pipe, the
// seccomp listener), and with a second P its runtime keeps waking on the
// payload's CPUs. The Go scheduler leaves a P in a blocking syscall
// (the reaper's wait4) to its goroutine for 10 ms while another P is idle
// (runtime/proc.go, retake), and sysmon meanwhile polls every 20 µs,
// 50 times, then at doubling intervals; with one P it takes the P back at
// its second tick and sleeps until a timer. Issue 13 measured the
// difference on the payload, python3 -S -c pass (25 runs each, as root
// and as uid 65534): the init preempted it 16-20 times per run, now 3-5,
// and its wall time from execve to exit dropped 1.2-1.9 ms, its CPU time
// 0.4-0.7 ms, to bare python3's. The call stays for the mark, and so
// that no path reaches the payload's wait on two Ps.
func (in *initProc) waitOnOneP() {
	runtime.GOMAXPROCS(1)
	in.tl.mark(fmt.Sprintf("init: GOMAXPROCS %d while the payload runs", runtime.GOMAXPROCS(0)))
}

// reportFiles sends the workspace report. Every process but the init is
// gone by now, so the workspace can no longer change under the walk.
func (in *initProc) reportFiles() {
	files := os.NewFile(filesFD, "files")
	defer files.Close()
	if err := newCollector(files, withInputs(in.spec.Outputs, in.inputBytes), in.inputs).collect(in.spec.Workdir); err != nil {
		in.send(StatusMsg{Kind: kindWarning, Msg: fmt.Sprintf("workspace report: %v", err)})
	}
}

// readControl forwards the supervisor's signals to the payload. EOF means
// the supervisor is gone: then the whole sandbox goes too (a backstop for
// Pdeathsig). So does anything but a Control message: the supervisor
// never sends one, and a pipe that says something else cannot be trusted
// to say kill when it must (fail closed).
func (in *initProc) readControl() {
	for {
		m, err := expect(in.ctl, ctlControl)
		if err != nil {
			killAll()
			os.Exit(1)
		}
		c := m.Control
		if c.Kill {
			killAll()
		} else if c.Signal > 0 && c.Signal < 65 {
			unix.Kill(in.payloadPid, unix.Signal(c.Signal))
		}
	}
}

// killAll sends SIGKILL to every process of the sandbox but the init:
// kill(-1) from pid 1 reaches exactly its own pid namespace (kill(2)).
func killAll() {
	unix.Kill(-1, unix.SIGKILL)
}
