package nsjail

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// warmDriver is the stub the warm interpreter runs (python3 -c): stdlib
// only, inside the binary, never read from the sandbox's files.
//
//go:embed warm_driver.py
var warmDriver string

// warmProc is a warm sandbox's waiting interpreter, in the init.
type warmProc struct {
	pid  int
	path string   // the interpreter, resolved in the Spec's PATH
	sock *os.File // the init's end of the handoff socket (the driver's fd 3)
	// base is the interpreter's CPU time before its payload (the
	// preload), left out of the payload's usage.
	baseUser, baseSys time.Duration
	// stopWatch ends watchWarm (an eventfd); watchDone is closed when it
	// has returned.
	stopWatch int
	watchDone chan struct{}
	// cold: started for its payload (startRunner), not ahead of it: its
	// start is the payload's, and nothing watched it wait.
	cold bool
}

// maxWarmLine bounds the driver's one line ("ready" or "error ...").
const maxWarmLine = 4096

// warmScratch are the writable directories a preload may have written
// to, emptied before the sandbox says ready: a pooled payload finds its
// workspace and /tmp as fresh as a cold one.
func (in *initProc) warmScratch() []string {
	return []string{in.spec.Workdir, "/tmp", "/dev/shm"}
}

// startWarm forks the interpreter as the payload's process (it is held
// at its setsid and given the payload's rlimits, like a cold payload),
// waits until it has imported the preload, and empties what the preload
// wrote. selfLimits says the kernel gave no seccomp listener: the init
// then takes the payload's limits itself before the fork (run).
func (in *initProc) startWarm(selfLimits []Rlimit) error {
	w := in.spec.Warm
	path, err := lookPath(w.Interpreter, envValue(in.spec.Env, "PATH"))
	if err != nil {
		return fmt.Errorf("look up %s: %w", w.Interpreter, err)
	}
	wp, err := in.forkDriver(w.Interpreter, path, w.Preload, in.spec.Env, selfLimits)
	if err != nil {
		return err
	}
	for _, dir := range in.warmScratch() {
		if err := emptyDir(dir); err != nil {
			unix.Kill(wp.pid, unix.SIGKILL)
			wp.sock.Close()
			return err
		}
	}
	wp.stopWatch, err = unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Kill(wp.pid, unix.SIGKILL)
		wp.sock.Close()
		return fmt.Errorf("eventfd: %w", err)
	}
	wp.watchDone = make(chan struct{})
	go in.watchWarm(wp)
	in.warm = wp
	return nil
}

// startRunner starts a cold Python payload through the driver, at once:
// the same process a warm one gets, without a preload, so that its
// uncaught exception is reported (Result.Error). Its start is the
// payload's, in its usage.
func (in *initProc) startRunner(argv0, path string, payload []string) error {
	// After "--", the payload's argv, so that its command line shows
	// what it runs (the driver reads it from the handoff).
	wp, err := in.forkDriver(argv0, path, append([]string{"--"}, payload...), in.environ, nil)
	if err != nil {
		return err
	}
	wp.cold = true
	in.warm = wp
	return nil
}

// forkDriver forks path (as argv0) -c <driver> PRELOAD... as the
// payload's process, held and limited like one, and waits for its "ready".
func (in *initProc) forkDriver(argv0, path string, preload, env []string, selfLimits []Rlimit) (*warmProc, error) {
	if selfLimits != nil {
		if err := setRlimits(selfLimits); err != nil {
			return nil, err
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair(AF_UNIX, SOCK_STREAM): %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "warm"), fds[1]
	argv := append([]string{argv0, "-c", warmDriver}, preload...)
	pid, err := forkExecOnTwoPs(path, argv, &syscall.ProcAttr{
		Dir:   in.spec.Workdir,
		Env:   env,
		Files: []uintptr{0, 1, 2, uintptr(theirs)},
		// As a cold payload: a new session, no controlling terminal
		// (CVE-2017-5226), and the setsid is where the hold limits it.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	unix.Close(theirs)
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("fork+exec %s -c <driver>: %w", path, err)
	}
	if in.limits != nil {
		held, herr := in.limits.heldPid()
		if herr == nil && held != pid {
			herr = fmt.Errorf("pid %d started, but the process held before its execve was pid %d", pid, held)
		}
		if herr != nil {
			unix.Kill(pid, unix.SIGKILL)
			mine.Close()
			return nil, fmt.Errorf("setrlimit (payload's limits) on the interpreter: %w", herr)
		}
	}
	wp := &warmProc{pid: pid, path: path, sock: mine}
	line, err := bufio.NewReaderSize(io.LimitReader(mine, maxWarmLine), maxWarmLine).ReadString('\n')
	if line != "ready\n" {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		mine.Close()
		if msg, ok := strings.CutPrefix(strings.TrimSpace(line), "error "); ok {
			return nil, fmt.Errorf("%s (pid %d): %s", path, pid, msg)
		}
		return nil, fmt.Errorf("%s (pid %d) ended before it was ready (%s; read: %v)", path, pid, describeWaitStatus(ws), err)
	}
	return wp, nil
}

// watchWarm ends the sandbox if its interpreter dies while it waits (the
// OOM killer, a kill from the host): the driver never writes after
// "ready", so its end of the socket becomes readable only at its exit. A
// sandbox without its interpreter is gone (the supervisor's Done), and a
// pool drops it instead of handing out a run that could only fail.
func (in *initProc) watchWarm(wp *warmProc) {
	defer close(wp.watchDone)
	fds := []unix.PollFd{{Fd: int32(wp.sock.Fd()), Events: unix.POLLIN | unix.POLLRDHUP}, {Fd: int32(wp.stopWatch), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if fds[1].Revents != 0 {
			return
		}
		if err == nil && fds[0].Revents == 0 {
			continue
		}
		msg := fmt.Sprintf("the warm interpreter (pid %d) ended while it waited for its payload", wp.pid)
		if err != nil {
			msg = fmt.Sprintf("poll the warm interpreter's socket: %v", err)
		}
		in.send(StatusMsg{Kind: kindError, Step: "wait for the payload", Msg: "wait for the payload: " + msg})
		killAll()
		os.Exit(1)
	}
}

// stopWatching ends watchWarm before the interpreter is handed its
// payload or killed.
func (wp *warmProc) stopWatching() {
	if wp.watchDone == nil {
		return
	}
	var one = [8]byte{1}
	unix.Write(wp.stopWatch, one[:])
	<-wp.watchDone
	unix.Close(wp.stopWatch)
}

func describeWaitStatus(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// emptyDir removes everything below dir (not dir itself); a dir that does
// not exist has nothing to remove.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &pathError{"readdir", dir, err}
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return &pathError{"remove what the preload wrote:", p, err}
		}
	}
	return nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// takesWarm reports whether the payload runs in the waiting interpreter
// (warmArgv), argv[0] resolved to argv0.
func (in *initProc) takesWarm(argv0 string, p *Payload) bool {
	return in.warm != nil && argv0 == in.warm.path && warmArgv(p.Argv, p.Env)
}

// dropWarm kills the waiting interpreter of a payload that is not for it,
// and re-arms the hold for the cold payload that follows. Its CPU time
// stays out of the payload's (base).
func (in *initProc) dropWarm() {
	wp := in.warm
	in.warm = nil
	wp.stopWatching()
	unix.Kill(wp.pid, unix.SIGKILL)
	var ws unix.WaitStatus
	var ru unix.Rusage
	unix.Wait4(wp.pid, &ws, 0, &ru)
	wp.sock.Close()
	in.warmBase = &warmProc{baseUser: time.Duration(ru.Utime.Nano()), baseSys: time.Duration(ru.Stime.Nano())}
	if in.limits != nil {
		in.limits.rearm()
	}
	in.resetDenials()
}

// rearm makes the next setsid the payload's first again.
func (l *payloadLimits) rearm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used, l.pid, l.err = false, 0, nil
}

// resetDenials forgets what the filter refused before the payload (the
// interpreter's preload): the Result counts the payload's.
func (in *initProc) resetDenials() {
	if d := in.denials; d != nil {
		d.mu.Lock()
		d.counts, d.other, d.killed = map[int]int{}, 0, map[int]bool{}
		d.mu.Unlock()
	}
}

// handOff gives the waiting interpreter its payload: the lowered rlimits
// first (prlimit(2), from a thread without the filter: the init guard
// refuses prlimit64 on another pid to filtered threads), then argv and the
// environment, and closes the socket, which the driver closes too.
func (in *initProc) handOff(p *Payload) (int, error) {
	wp := in.warm
	wp.stopWatching()
	st, err := readProcStat(wp.pid)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/stat: %w", wp.pid, err)
	}
	tick := 10 * time.Millisecond // USER_HZ is 100 on Linux (proc(5))
	var lower []Rlimit
	if p.Lower != nil {
		lower = p.Lower.Rlimits
	}
	// A cold runner (startRunner) is the payload from its start: its
	// RLIMIT_CPU was never widened by warmCPUBudget, so there is no
	// preload to take out of its usage or rebase its backstop on.
	if !wp.cold {
		wp.baseUser, wp.baseSys = time.Duration(st.utime+st.cutime)*tick, time.Duration(st.stime+st.cstime)*tick
		if cpu := rebaseCPURlimit(in.payloadRlimits, wp.baseUser+wp.baseSys); cpu != nil {
			lower = append(append([]Rlimit{}, lower...), *cpu)
		}
	}
	if len(lower) > 0 {
		lowered := lowerRlimits(in.currentRlimits(), lower)
		done := make(chan error, 1)
		go func() { done <- prlimitAll(wp.pid, lowered) }()
		if err := <-done; err != nil {
			return 0, err
		}
	}
	if !wp.cold {
		in.resetDenials()
	}
	addr, err := in.listenReport()
	if err != nil {
		return 0, err
	}
	_, err = wp.sock.Write(warmHandoff(addr, p.FigureBytes, p.Argv, in.environ))
	wp.sock.Close()
	if err != nil {
		return 0, fmt.Errorf("write the payload to the interpreter (pid %d): %w", wp.pid, err)
	}
	in.warmBase = wp
	return wp.pid, nil
}

// rebaseCPURlimit is the warm interpreter's RLIMIT_CPU backstop at the
// handoff: the sandbox's, less the preload's budget it was widened by
// (warmCPUBudget), plus what the preload used (rounded up to seconds), so
// that the payload's own CPU gets what a cold payload's would. nil when
// there is no backstop or nothing to lower.
func rebaseCPURlimit(rl []Rlimit, used time.Duration) *Rlimit {
	r := rlimitFor(rl, "RLIMIT_CPU")
	budget := uint64(warmCPUBudget / time.Second)
	if r == nil || r.Soft <= budget || r.Hard <= budget {
		return nil
	}
	secs := uint64((used + time.Second - 1) / time.Second)
	if secs >= budget {
		return nil
	}
	return &Rlimit{Resource: "RLIMIT_CPU", Soft: r.Soft - budget + secs, Hard: r.Hard - budget + secs}
}

// listenReport listens on a fresh abstract unix address (unix(7)), in
// the sandbox's own network namespace, for the driver's report of what
// the payload died of and the figures it left; the driver connects only
// then, so the payload has no fd of it. A reader takes what comes as it
// comes (init_report_linux.go).
func (in *initProc) listenReport() (string, error) {
	var b [12]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		return "", fmt.Errorf("getrandom: %w", err)
	}
	addr := "sbx-report-" + hex.EncodeToString(b[:])
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("socket(AF_UNIX, SOCK_STREAM): %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: "@" + addr}); err != nil {
		unix.Close(fd)
		return "", fmt.Errorf("bind @%s: %w", addr, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		return "", fmt.Errorf("listen @%s: %w", addr, err)
	}
	r, err := startReportReader(fd)
	if err != nil {
		unix.Close(fd)
		return "", err
	}
	in.report = r
	return addr, nil
}

// maxReport bounds the driver's error record (it writes at most 60000
// bytes).
const maxReport = 64 << 10

// pyReport is what the runner reported: the error the payload died of,
// the figures it left (PNGs, unchecked: the supervisor checks them) and
// whether some were left out.
type pyReport struct {
	err        *PyError
	figures    [][]byte
	figuresCut bool
}

// readReport takes what the driver reported (warm_driver.py,
// _sbx_report). Every process but the init is gone by now, so nothing
// more can come. The last well-formed connection of the first few wins:
// anything of the payload's own that connected first does not hide the
// driver's, which connects last.
func (in *initProc) readReport() pyReport {
	if in.report == nil {
		return pyReport{}
	}
	var rep pyReport
	for _, b := range in.report.stopAndTake() {
		if r, ok := parseReport(b); ok {
			rep = r
		}
	}
	in.report = nil
	return rep
}

// parseReport decodes a report's records: kind (1 byte), length (4,
// big-endian), body; "e" the error, "f" a figure, "t" figures left out,
// "z" the end, last. ok is false for a malformed or cut one.
func parseReport(b []byte) (pyReport, bool) {
	var rep pyReport
	for len(b) > 0 {
		if len(b) < 5 {
			return pyReport{}, false
		}
		kind, n := b[0], binary.BigEndian.Uint32(b[1:5])
		if uint64(n) > uint64(len(b)-5) {
			return pyReport{}, false
		}
		body := b[5 : 5+n]
		b = b[5+n:]
		switch {
		case kind == 'e' && rep.err == nil && n <= maxReport:
			e := parseError(body)
			if e == nil {
				return pyReport{}, false
			}
			rep.err = e
		case kind == 'f' && len(rep.figures) < maxFigures:
			rep.figures = append(rep.figures, body)
		case kind == 'f', kind == 't':
			rep.figuresCut = true
		case kind == 'z' && n == 0 && len(b) == 0:
			return rep, true
		default:
			return pyReport{}, false
		}
	}
	return pyReport{}, false
}

// parseError decodes an error record: name, value, then file, line,
// function and code of each frame, NUL-separated; nil for a malformed one.
func parseError(b []byte) *PyError {
	f := strings.Split(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00")
	if len(b) == 0 || len(f) < 2 || (len(f)-2)%4 != 0 || f[0] == "" {
		return nil
	}
	e := &PyError{Name: f[0], Value: f[1], Traceback: []PyFrame{}}
	for i := 2; i+3 < len(f); i += 4 {
		line, err := strconv.Atoi(f[i+1])
		if err != nil {
			return nil
		}
		e.Traceback = append(e.Traceback, PyFrame{File: f[i], Line: line, Function: f[i+2], Code: f[i+3]})
	}
	return e
}

// currentRlimits are the payload's rlimits as the init set them.
func (in *initProc) currentRlimits() []Rlimit {
	if in.limits != nil {
		return in.limits.rl
	}
	return in.payloadRlimits
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// subtractWarmBase leaves the interpreter's time before its payload out
// of the payload's usage.
func (in *initProc) subtractWarmBase(m *StatusMsg) {
	if in.warmBase == nil {
		return
	}
	m.UserUS = max(0, m.UserUS-in.warmBase.baseUser.Microseconds())
	m.SystemUS = max(0, m.SystemUS-in.warmBase.baseSys.Microseconds())
}
