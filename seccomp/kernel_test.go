package seccomp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel tests load real filters, which cannot be undone, so each runs
// in a child: the test binary re-executed with childEnv naming a scenario.
// The child gets the compiled Filter as JSON on fd 3, exactly as the
// sandbox init gets it from the host, locks its main goroutine to a
// thread, sets no_new_privs, calls Load there, runs Serve in another
// goroutine (so on another, unfiltered thread, as the init will), then
// does the scenario on the filtered thread and writes a childReport on
// fd 4.
const childEnv = "SBX_SECCOMP_TEST_CHILD"

func TestMain(m *testing.M) {
	if s := os.Getenv(childEnv); s != "" {
		childMain(s)
	}
	os.Exit(m.Run())
}

type childReport struct {
	LoadErr  string             `json:"load_err,omitempty"`
	Listener int                `json:"listener"`
	Cloexec  bool               `json:"cloexec"`
	LoadNs   int64              `json:"load_ns"`
	Results  map[string]string  `json:"results,omitempty"`
	Counts   map[int]int        `json:"counts,omitempty"`
	ServeErr string             `json:"serve_err,omitempty"`
	Bench    map[string]float64 `json:"bench,omitempty"`
	// Payload is the wait status of a program the child ran.
	Payload *unix.WaitStatus `json:"payload,omitempty"`
}

// kcheck is one syscall the "calls" scenario makes on the filtered thread,
// with arguments for which the kernel's own answer (root, no filter) is
// never EPERM or ENOSYS, so those can only come from the filter. Expected
// results per policy: an errno name, "ok", or "=" for the same result as
// without a filter (the filter let it through).
type kcheck struct {
	key, sys        string
	allow, denylist string
	fn              func() error
}

var devnull = -1

func errnoErr(e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func sys(nr uintptr, a ...uintptr) error {
	var x [6]uintptr
	copy(x[:], a)
	_, _, e := unix.Syscall6(nr, x[0], x[1], x[2], x[3], x[4], x[5])
	return errnoErr(e)
}

// sysFD is sys for calls that return a new fd, which it closes.
func sysFD(nr uintptr, a ...uintptr) error {
	var x [6]uintptr
	copy(x[:], a)
	r, _, e := unix.Syscall6(nr, x[0], x[1], x[2], x[3], x[4], x[5])
	if e == 0 {
		unix.Close(int(r))
	}
	return errnoErr(e)
}

// strs keeps the C strings handed to syscalls alive for the whole run.
var strs = map[string]*byte{}

func str(s string) uintptr {
	p, ok := strs[s]
	if !ok {
		var err error
		if p, err = unix.BytePtrFromString(s); err != nil {
			panic(err)
		}
		strs[s] = p
	}
	return uintptr(unsafe.Pointer(p))
}

var scratch [256]byte

func buf() uintptr { return uintptr(unsafe.Pointer(&scratch[0])) }

var kernelChecks = []kcheck{
	{"getpid", "getpid", "=", "=", func() error { return sys(unix.SYS_GETPID) }},
	{"getppid", "getppid", "=", "=", func() error { return sys(unix.SYS_GETPPID) }},
	{"open /dev/null", "openat", "=", "=", func() error {
		return sysFD(unix.SYS_OPENAT, ^uintptr(99), str("/dev/null"), unix.O_RDONLY|unix.O_CLOEXEC)
	}},
	{"socket AF_INET", "socket", "=", "=", func() error { return sysFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0) }},
	{"socket AF_UNIX", "socket", "=", "=", func() error { return sysFD(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0) }},
	{"ioctl FIONBIO", "ioctl", "=", "=", func() error { return sys(unix.SYS_IOCTL, uintptr(devnull), ioFIONBIO, buf()) }},
	{"ioctl TCGETS", "ioctl", "=", "=", func() error { return sys(unix.SYS_IOCTL, uintptr(devnull), unix.TCGETS, buf()) }},
	{"ioctl TIOCSTI", "ioctl", "EPERM", "EPERM", func() error { return sys(unix.SYS_IOCTL, uintptr(devnull), unix.TIOCSTI, buf()) }},
	{"ioctl TIOCSTI|1<<32", "ioctl", "EPERM", "EPERM", func() error { return sys(unix.SYS_IOCTL, uintptr(devnull), unix.TIOCSTI|1<<32, buf()) }},
	{"ioctl TIOCLINUX", "ioctl", "EPERM", "EPERM", func() error { return sys(unix.SYS_IOCTL, uintptr(devnull), unix.TIOCLINUX, buf()) }},
	{"ptrace PTRACE_ATTACH", "ptrace", "EPERM", "EPERM", func() error { return sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x3fffffff) }},
	{"process_vm_readv", "process_vm_readv", "EPERM", "EPERM", func() error { return sys(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid())) }},
	{"mount", "mount", "EPERM", "EPERM", func() error { return sys(unix.SYS_MOUNT, str("none"), str("/nonexistent-sbx-test"), str("tmpfs")) }},
	{"open_tree", "open_tree", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_OPEN_TREE, ^uintptr(99), str("/nonexistent-sbx-test")) }},
	{"fsopen", "fsopen", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_FSOPEN, str("sbx-no-such-fs")) }},
	// A multithreaded process cannot unshare a user namespace (EINVAL).
	{"unshare CLONE_NEWUSER", "unshare", "EPERM", "EPERM", func() error { return sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) }},
	{"setns", "setns", "EPERM", "EPERM", func() error { return sys(unix.SYS_SETNS, ^uintptr(0)) }},
	// CLONE_THREAD without CLONE_SIGHAND is EINVAL: with CLONE_NEWUSER the
	// filter answers first, without it the kernel does.
	{"clone CLONE_NEWUSER", "clone", "EPERM", "EPERM", func() error { return sys(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_THREAD) }},
	{"clone CLONE_NEWNET|CLONE_NEWNS", "clone", "EPERM", "EPERM", func() error { return sys(unix.SYS_CLONE, unix.CLONE_NEWNET|unix.CLONE_NEWNS|unix.CLONE_THREAD) }},
	{"clone no namespace", "clone", "=", "=", func() error { return sys(unix.SYS_CLONE, unix.CLONE_THREAD) }},
	{"clone3", "clone3", "ENOSYS", "ENOSYS", func() error { return sys(unix.SYS_CLONE3) }},
	{"bpf", "bpf", "EPERM", "EPERM", func() error { return sys(unix.SYS_BPF, 0, 0, 0) }},
	{"io_uring_setup", "io_uring_setup", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_IO_URING_SETUP, 1, 0) }},
	{"userfaultfd", "userfaultfd", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_USERFAULTFD, unix.O_CLOEXEC) }},
	{"perf_event_open", "perf_event_open", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0)) }},
	{"keyctl", "keyctl", "EPERM", "EPERM", func() error { return sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 0) }},
	{"kexec_load", "kexec_load", "EPERM", "EPERM", func() error { return sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0xffffffff) }},
	{"init_module", "init_module", "EPERM", "EPERM", func() error { return sys(unix.SYS_INIT_MODULE, 0, 0, 0) }},
	{"acct", "acct", "EPERM", "EPERM", func() error { return sys(unix.SYS_ACCT, str("/nonexistent-sbx-test/x")) }},
	{"syslog", "syslog", "EPERM", "EPERM", func() error { return sys(unix.SYS_SYSLOG, 10) }},
	{"clock_settime", "clock_settime", "EPERM", "EPERM", func() error { return sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_MONOTONIC, buf()) }},
	{"socket AF_PACKET", "socket", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) }},
	{"socket AF_NETLINK", "socket", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) }},
	// The kernel reads an int and takes this for AF_INET; the filter
	// compares all 64 bits and refuses.
	{"socket AF_INET|1<<32", "socket", "EPERM", "EPERM", func() error { return sysFD(unix.SYS_SOCKET, unix.AF_INET|1<<32, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0) }},
	{"personality query", "personality", "=", "=", func() error { return sys(unix.SYS_PERSONALITY, 0xffffffff) }},
	{"personality ADDR_NO_RANDOMIZE|1<<32", "personality", "EPERM", "EPERM", func() error { return sys(unix.SYS_PERSONALITY, addrNoRandomize|1<<32) }},
	{"inotify_init1", "inotify_init1", "EPERM", "=", func() error { return sysFD(unix.SYS_INOTIFY_INIT1, unix.IN_CLOEXEC) }},
	{"fork+exec /bin/true", "", "ok", "ok", forkExecTrue},
	{"Go runtime", "", "ok", "ok", churnRuntime},
}

// forkExecTrue does what the init does to start the payload: fork and exec
// from the filtered thread (so the child starts under the filter), wait.
func forkExecTrue() error {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{
		Dir: "/", Env: []string{"PATH=/bin"}, Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		return err
	}
	if ws.ExitStatus() != 0 {
		return fmt.Errorf("/bin/true: %v", ws)
	}
	return nil
}

// churnRuntime makes the Go runtime work on the filtered thread: garbage
// collection, new goroutines and threads, heap growth, timers.
func churnRuntime() error {
	var wg sync.WaitGroup
	sink := make(chan []byte, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				sink <- make([]byte, 64<<10)
				<-sink
			}
		}()
	}
	keep := make([][]byte, 0, 256)
	for range 256 {
		keep = append(keep, make([]byte, 32<<10))
	}
	runtime.GC()
	time.Sleep(5 * time.Millisecond)
	wg.Wait()
	runtime.GC()
	runtime.KeepAlive(keep)
	return nil
}

func resultOf(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(syscall.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// childMain runs one scenario and exits; it never returns.
func childMain(scenario string) {
	runtime.LockOSThread()
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "seccomp test child (%s): "+format+"\n", append([]any{scenario}, a...)...)
		os.Exit(2)
	}
	var f *Filter
	if err := json.NewDecoder(os.NewFile(3, "filter")).Decode(&f); err != nil {
		die("decode filter: %v", err)
	}
	report := os.NewFile(4, "report")
	// Nothing the child runs may inherit the test's pipes.
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	rep := childReport{Listener: -1}
	finish := func() {
		if err := json.NewEncoder(report).Encode(&rep); err != nil {
			die("write report: %v", err)
		}
		os.Exit(0)
	}
	// SECCOMP_RET_KILL_PROCESS dumps core; the kill tests want no cores.
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	var err error
	if devnull, err = unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		die("open /dev/null: %v", err)
	}

	if scenario == "hup" {
		serveUntilHUP(f, &rep)
		finish()
	}
	var bench map[string]float64
	if scenario == "bench" {
		bench = map[string]float64{"getppid_bare_ns": getppidNs()}
	}
	if scenario != "nonnp" {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			die("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
		}
	}
	if scenario == "fallback" || strings.HasSuffix(scenario, "-fallback") {
		// An outer filter that already has a listener makes the kernel
		// refuse a second one (EBUSY).
		outer := mustCompileChild(&Policy{Name: "outer", Default: ActAllow, Rules: []Rule{{Names: []string{"acct"}, Action: ActNotifyErrno, Why: "w"}}})
		if _, err := Load(outer); err != nil {
			die("load outer filter: %v", err)
		}
	}

	var mu sync.Mutex
	counts := map[int]int{}
	ctx, cancel := context.WithCancel(context.Background())
	serveDone := make(chan error, 1)
	if f != nil {
		t0 := time.Now()
		rep.Listener, err = Load(f)
		rep.LoadNs = time.Since(t0).Nanoseconds()
		if err != nil {
			rep.LoadErr = err.Error()
			finish()
		}
	}
	if scenario == "closed" {
		// Nobody will answer: notified calls must fail, not hang.
		unix.Close(rep.Listener)
		serveDone <- nil
		rep.Results = map[string]string{
			"ptrace":  resultOf(sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x3fffffff)),
			"syslog":  resultOf(sys(unix.SYS_SYSLOG, 10)),
			"clone3":  resultOf(sys(unix.SYS_CLONE3)),
			"getppid": resultOf(sys(unix.SYS_GETPPID)),
		}
		finish()
	}
	if rep.Listener >= 0 {
		fl, _ := unix.FcntlInt(uintptr(rep.Listener), unix.F_GETFD, 0)
		rep.Cloexec = fl&unix.FD_CLOEXEC != 0
		go func() {
			serveDone <- Serve(ctx, rep.Listener, f, func(nr int) {
				mu.Lock()
				counts[nr]++
				mu.Unlock()
			}, nil)
		}()
	} else {
		serveDone <- nil
	}

	switch scenario {
	case "calls", "fallback", "nonnp":
		rep.Results = map[string]string{}
		for _, c := range kernelChecks {
			rep.Results[c.key] = resultOf(c.fn())
		}
	case "int80", "x32", "int80-fallback", "x32-fallback":
		abi := strings.TrimSuffix(scenario, "-fallback")
		rep.Results = map[string]string{abi: foreignABICall(abi)}
	case "kill":
		rep.Results = map[string]string{"acct": "survived: " + resultOf(sys(unix.SYS_ACCT, str("/nonexistent-sbx-test/x")))}
	case "exec":
		var argv []string
		if err := json.Unmarshal([]byte(os.Getenv("SBX_SECCOMP_TEST_ARGV")), &argv); err != nil || len(argv) == 0 {
			die("SBX_SECCOMP_TEST_ARGV: %v", err)
		}
		ws, err := runPayload(argv, os.Getenv("SBX_SECCOMP_TEST_DIR"))
		if err != nil {
			die("run %s: %v", argv[0], err)
		}
		rep.Payload = &ws
	case "bench":
		bench["getppid_filtered_ns"] = getppidNs()
		if f != nil && f.Notify {
			bench["notified_denial_ns"] = timeNs(2000, func() { unix.RawSyscall(unix.SYS_SYSLOG, 10, 0, 0) })
		}
		bench["errno_denial_ns"] = timeNs(100000, func() { unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0) })
		rep.Bench = bench
	default:
		die("unknown scenario")
	}
	cancel()
	if err := <-serveDone; err != nil {
		rep.ServeErr = err.Error()
	}
	mu.Lock()
	rep.Counts = counts
	mu.Unlock()
	finish()
}

func mustCompileChild(p *Policy) *Filter {
	f, err := Compile(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return f
}

func timeNs(n int, fn func()) float64 {
	fn()
	t0 := time.Now()
	for range n {
		fn()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// getppidNs is the best of several runs of an allowed syscall, in ns.
func getppidNs() float64 {
	best := 0.0
	for range 5 {
		ns := timeNs(200000, func() { unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0) })
		if best == 0 || ns < best {
			best = ns
		}
	}
	return best
}

// runPayload runs argv the way the init runs a payload: forked from the
// filtered thread, in a new session, waited for there.
func runPayload(argv []string, dir string) (unix.WaitStatus, error) {
	if dir == "" {
		dir = "/"
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "HOME=" + dir, "TMPDIR=" + dir, "MPLCONFIGDIR=" + dir}, Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, err
	}
	var ws unix.WaitStatus
	_, err = unix.Wait4(pid, &ws, 0, nil)
	return ws, err
}

// serveUntilHUP loads the filter on a thread that then exits, while Serve
// runs here: Serve must answer that thread's denial, then see the filter
// unused (POLLHUP) and return by itself.
func serveUntilHUP(f *Filter, rep *childReport) {
	type loaded struct {
		fd  int
		err error
	}
	ready := make(chan loaded)
	result := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			ready <- loaded{-1, err}
			return
		}
		fd, err := Load(f)
		ready <- loaded{fd, err}
		if err == nil {
			result <- resultOf(sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x3fffffff))
		}
	}()
	l := <-ready
	if l.err != nil {
		rep.LoadErr = l.err.Error()
		return
	}
	rep.Listener = l.fd
	counts := map[int]int{}
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), l.fd, f, func(nr int) { counts[nr]++ }, nil) }()
	select {
	case err := <-done:
		if err != nil {
			rep.ServeErr = err.Error()
		}
		rep.Results = map[string]string{"ptrace": <-result, "serve": "returned"}
	case <-time.After(10 * time.Second):
		rep.Results = map[string]string{"serve": "still running 10s after the filtered thread exited"}
	}
	rep.Counts = counts
}

// child is the outcome of one child run.
type child struct {
	report childReport
	ws     unix.WaitStatus
	stdout string
	stderr string
}

func runChild(t *testing.T, scenario string, f *Filter, env ...string) child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Pdeathsig follows the thread that started the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+scenario), env...)
	fr, fw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.ExtraFiles = []*os.File{fr, rw}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fr.Close()
	rw.Close()
	if err := json.NewEncoder(fw).Encode(f); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	out, err := io.ReadAll(rr)
	rr.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	c := child{ws: unix.WaitStatus(cmd.ProcessState.Sys().(syscall.WaitStatus)), stdout: stdout.String(), stderr: stderr.String()}
	if len(out) > 0 {
		if err := json.Unmarshal(out, &c.report); err != nil {
			t.Fatalf("%s: report %q: %v", scenario, out, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: child timed out; stderr:\n%s", scenario, c.stderr)
	}
	return c
}

// exitedCleanly fails the test unless the child exited 0 with a report.
func (c child) exitedCleanly(t *testing.T, scenario string) {
	t.Helper()
	if !c.ws.Exited() || c.ws.ExitStatus() != 0 {
		t.Fatalf("%s: child ended with %v; stderr:\n%s", scenario, describeWS(c.ws), c.stderr)
	}
}

func describeWS(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus())
}

// countsByName turns counts by number into counts by name.
func countsByName(m map[int]int) map[string]int {
	out := map[string]int{}
	for nr, n := range m {
		out[SyscallName(nr)] += n
	}
	return out
}

func sortedCounts(m map[string]int) string {
	var s []string
	for k, v := range m {
		s = append(s, fmt.Sprintf("%s:%d", k, v))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func requireSeccomp(t *testing.T) {
	t.Helper()
	// SECCOMP_GET_ACTION_AVAIL (Linux 4.14) for the actions sbx uses.
	for _, act := range []uint32{unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_USER_NOTIF} {
		a := act
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 2, 0, uintptr(unsafe.Pointer(&a))); e != 0 {
			t.Skipf("kernel lacks seccomp action %#x: %v", act, e)
		}
	}
}

func TestKernelCalls(t *testing.T) {
	requireSeccomp(t)
	bare := runChild(t, "calls", nil)
	bare.exitedCleanly(t, "calls without filter")
	for _, name := range []string{Denylist, Allowlist} {
		t.Run(name, func(t *testing.T) {
			f := mustCompile(t, mustBuiltin(t, name))
			c := runChild(t, "calls", f)
			c.exitedCleanly(t, name)
			r := c.report
			if r.LoadErr != "" || r.ServeErr != "" {
				t.Fatalf("load: %q, serve: %q", r.LoadErr, r.ServeErr)
			}
			if r.Listener < 0 || !r.Cloexec {
				t.Errorf("listener fd %d, close-on-exec %v; want a listener the payload cannot inherit", r.Listener, r.Cloexec)
			}
			want := map[string]int{}
			for _, k := range kernelChecks {
				exp := k.allow
				if name == Denylist {
					exp = k.denylist
				}
				b := bare.report.Results[k.key]
				if exp == "=" {
					exp = b
				} else if (exp == "EPERM" || exp == "ENOSYS") && b == exp && os.Geteuid() == 0 {
					// (Without root the kernel refuses many of these itself.)
					t.Errorf("%s: the kernel itself answers %s here, so the check proves nothing", k.key, b)
				}
				if got := r.Results[k.key]; got != exp {
					t.Errorf("%s: %s, want %s (without filter: %s)", k.key, got, exp, b)
				}
				if exp == "EPERM" {
					want[k.sys]++
				}
			}
			// Every denial counted, under its own number, and nothing else:
			// the Go runtime and the fork+exec path triggered none.
			if got := countsByName(r.Counts); sortedCounts(got) != sortedCounts(want) {
				t.Errorf("denials counted:\n got %s\nwant %s", sortedCounts(got), sortedCounts(want))
			}
		})
	}
}

// int80Fault is foreignABICall's answer where the kernel has no int 0x80
// gate (kernel_abi_amd64_test.go).
const int80Fault = "fault: no int 0x80 (IA32 emulation off)"

func TestKernelOtherABIsKill(t *testing.T) {
	requireSeccomp(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("int 0x80 and x32 exist on amd64 only")
	}
	for _, scenario := range []string{"int80", "x32"} {
		bare := runChild(t, scenario, nil)
		bare.exitedCleanly(t, scenario+" without filter")
		t.Logf("%s without filter: %s", scenario, bare.report.Results)
		if bare.report.Results[scenario] == int80Fault {
			// No gate to filter: what must hold is that the call still
			// runs nothing under each filter and its fallback.
			t.Logf("this kernel has no IA32 emulation (int 0x80 faults before any syscall entry): checking that it faults under every filter too, not the filter's kill")
			for _, name := range []string{Denylist, Allowlist} {
				for _, sc := range []string{scenario, scenario + "-fallback"} {
					c := runChild(t, sc, mustCompile(t, mustBuiltin(t, name)))
					c.exitedCleanly(t, sc+" under "+name)
					if got := c.report.Results[scenario]; got != int80Fault {
						t.Errorf("%s under %s: %q, want %q as without a filter", sc, name, got, int80Fault)
					}
				}
			}
			continue
		}
		for _, name := range []string{Denylist, Allowlist} {
			// Both notify: Serve kills the caller with SIGKILL; the
			// fallback program leaves it to the kernel (SIGSYS).
			c := runChild(t, scenario, mustCompile(t, mustBuiltin(t, name)))
			if !c.ws.Signaled() || c.ws.Signal() != unix.SIGKILL {
				t.Errorf("%s under %s: child ended with %s (%v), want killed by SIGKILL (Serve)", scenario, name, describeWS(c.ws), c.report.Results)
			}
			c = runChild(t, scenario+"-fallback", mustCompile(t, mustBuiltin(t, name)))
			if !c.ws.Signaled() || c.ws.Signal() != unix.SIGSYS {
				t.Errorf("%s under %s's fallback: child ended with %s (%v), want killed by SIGSYS", scenario, name, describeWS(c.ws), c.report.Results)
			}
		}
	}
}

func TestKernelKillAction(t *testing.T) {
	requireSeccomp(t)
	c := runChild(t, "kill", mustCompile(t, syntheticPolicies()[1]))
	if !c.ws.Signaled() || c.ws.Signal() != unix.SIGSYS {
		t.Errorf("acct under a kill rule: %s (%v), want killed by SIGSYS", describeWS(c.ws), c.report.Results)
	}
}

func TestKernelLoadNeedsNoNewPrivs(t *testing.T) {
	requireSeccomp(t)
	// As root the kernel would take the filter without no_new_privs
	// (CAP_SYS_ADMIN); Load refuses anyway.
	c := runChild(t, "nonnp", mustCompile(t, mustBuiltin(t, Denylist)))
	c.exitedCleanly(t, "nonnp")
	if !strings.Contains(c.report.LoadErr, "no_new_privs") {
		t.Errorf("Load without no_new_privs: %q", c.report.LoadErr)
	}
}

func TestKernelFallbackWithoutListener(t *testing.T) {
	requireSeccomp(t)
	c := runChild(t, "fallback", mustCompile(t, mustBuiltin(t, Denylist)))
	c.exitedCleanly(t, "fallback")
	r := c.report
	if r.LoadErr != "" || r.Listener != -1 {
		t.Fatalf("Load under a filter that has a listener: fd %d, err %q; want the fallback (-1, nil)", r.Listener, r.LoadErr)
	}
	for key, want := range map[string]string{"ptrace PTRACE_ATTACH": "EPERM", "clone3": "ENOSYS", "mount": "EPERM", "ioctl TIOCSTI|1<<32": "EPERM", "getpid": "ok"} {
		if got := r.Results[key]; got != want {
			t.Errorf("fallback: %s: %s, want %s", key, got, want)
		}
	}
}

// TestKernelClosedListener: with the listener closed and nobody to answer,
// notified calls fail with ENOSYS (seccomp_unotify(2)) rather than hang, so
// an init whose Serve failed can close the listener and keep the payload
// from waiting forever.
func TestKernelClosedListener(t *testing.T) {
	requireSeccomp(t)
	c := runChild(t, "closed", mustCompile(t, mustBuiltin(t, Allowlist)))
	c.exitedCleanly(t, "closed")
	want := map[string]string{"ptrace": "ENOSYS", "syslog": "ENOSYS", "clone3": "ENOSYS", "getppid": "ok"}
	if !reflect.DeepEqual(c.report.Results, want) {
		t.Errorf("with the listener closed: %v, want %v", c.report.Results, want)
	}
}

func TestKernelServeEndsWhenFilterUnused(t *testing.T) {
	requireSeccomp(t)
	c := runChild(t, "hup", mustCompile(t, mustBuiltin(t, Denylist)))
	c.exitedCleanly(t, "hup")
	r := c.report
	if r.LoadErr != "" || r.ServeErr != "" || r.Results["serve"] != "returned" {
		t.Fatalf("load %q, serve %q, results %v", r.LoadErr, r.ServeErr, r.Results)
	}
	if r.Results["ptrace"] != "EPERM" || countsByName(r.Counts)["ptrace"] != 1 || len(r.Counts) != 1 {
		t.Errorf("ptrace from the other thread: %s, counts %v", r.Results["ptrace"], countsByName(r.Counts))
	}
}

// probeDenied lists the probe's keys for the issue 4 list; each must fail
// with EPERM under every built-in policy.
func probeDenied(results map[string]string) []string {
	var keys []string
	for k := range results {
		switch k {
		case "getpid", "socket:AF_UNIX", "socket:AF_INET", "personality:query", "clone3", "int0x80", "x32:getpid":
		default:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// TestKernelProbe runs testdata/seccomp_probe.py under each policy the way
// the init runs a payload, and holds it to issue 4: every listed call is
// refused with EPERM (clone3 with ENOSYS), calls from the other ABIs kill
// only the process that makes them, the probe itself survives, and the
// denials counted are exactly the probe's own (CPython's start-up, ctypes
// and fork trigger none, even under the allowlist).
func TestKernelProbe(t *testing.T) {
	requireSeccomp(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe knows x86_64 syscall numbers only")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("no /usr/bin/python3: %v", err)
	}
	probe, err := filepath.Abs("../testdata/seccomp_probe.py")
	if err != nil {
		t.Fatal(err)
	}
	run := func(f *Filter) (child, map[string]string) {
		c := runChild(t, "exec", f, "SBX_SECCOMP_TEST_ARGV="+mustJSON(t, []string{"/usr/bin/python3", probe}))
		c.exitedCleanly(t, "exec")
		if c.report.Payload == nil || !c.report.Payload.Exited() || c.report.Payload.ExitStatus() != 0 {
			t.Fatalf("probe: %v; stdout %s\nstderr:\n%s", c.report.Payload, c.stdout, c.stderr)
		}
		var res map[string]string
		if err := json.Unmarshal([]byte(c.stdout), &res); err != nil {
			t.Fatalf("probe output %q: %v\nstderr:\n%s", c.stdout, err, c.stderr)
		}
		return c, res
	}
	_, bare := run(nil)
	for _, k := range probeDenied(bare) {
		if bare[k] == "EPERM" && os.Geteuid() == 0 {
			t.Errorf("without a filter %s already gives EPERM: the probe's arguments prove nothing", k)
		}
	}
	for _, name := range []string{Denylist, Allowlist} {
		t.Run(name, func(t *testing.T) {
			c, res := run(mustCompile(t, mustBuiltin(t, name)))
			want := map[string]int{}
			for _, k := range probeDenied(bare) {
				if res[k] != "EPERM" {
					t.Errorf("%s: %s, want EPERM (without filter: %s)", k, res[k], bare[k])
				}
				want[strings.SplitN(k, ":", 2)[0]]++
			}
			int80 := "killed:SIGKILL"
			if bare["int0x80"] == "killed:SIGSEGV" {
				// A kernel without IA32 emulation: int 0x80 faults
				// before any syscall entry, filter or not.
				int80 = bare["int0x80"]
			}
			for k, exp := range map[string]string{
				"clone3": "ENOSYS", "int0x80": int80, "x32:getpid": "killed:SIGKILL",
				"getpid": bare["getpid"], "socket:AF_UNIX": bare["socket:AF_UNIX"], "socket:AF_INET": bare["socket:AF_INET"],
				"personality:query": bare["personality:query"],
			} {
				if res[k] != exp {
					t.Errorf("%s: %s, want %s", k, res[k], exp)
				}
			}
			if len(res) != len(bare) {
				t.Errorf("probe reported %d calls under %s, %d without filter", len(res), name, len(bare))
			}
			if got := countsByName(c.report.Counts); sortedCounts(got) != sortedCounts(want) {
				t.Errorf("denials counted:\n got %s\nwant %s", sortedCounts(got), sortedCounts(want))
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProbeSyscallNumbers holds the probe's x86_64 table to libseccomp's.
func TestProbeSyscallNumbers(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe's table is x86_64's")
	}
	src, err := os.ReadFile("../testdata/seccomp_probe.py")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "NR = {")
	end := strings.Index(s[start:], "}")
	if start < 0 || end < 0 {
		t.Fatal("no NR table in the probe")
	}
	n := 0
	for _, item := range strings.Split(s[start+len("NR = {"):start+end], ",") {
		name, nr, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			continue
		}
		name = strings.Trim(name, `" `)
		var got int
		fmt.Sscan(nr, &got)
		if want, err := SyscallNumber(name); err != nil || want != got {
			t.Errorf("probe says %s is %d; libseccomp: %d, %v", name, got, want, err)
		}
		n++
	}
	if n < 50 {
		t.Errorf("read only %d entries of the probe's table", n)
	}
}

// TestOverhead measures, and only reports: Compile cold and cached, Load,
// an allowed syscall (getppid) before and after each filter, and the cost
// of a denial answered by Serve or by the kernel alone.
func TestOverhead(t *testing.T) {
	requireSeccomp(t)
	// A one-rule filter shows what any filter costs an allowed syscall
	// (the kernel's seccomp entry work), apart from the program's length.
	minimal := &Policy{Name: "minimal", Default: ActAllow, Rules: []Rule{{Names: []string{"acct"}, Action: ActErrno, Why: "w"}}}
	for _, p := range []*Policy{minimal, mustBuiltin(t, Denylist), mustBuiltin(t, Allowlist)} {
		name := p.Name
		t0 := time.Now()
		if _, err := compile(p); err != nil {
			t.Fatal(err)
		}
		cold := time.Since(t0)
		f := mustCompile(t, p)
		t1 := time.Now()
		mustCompile(t, p)
		cached := time.Since(t1)
		c := runChild(t, "bench", f)
		c.exitedCleanly(t, "bench")
		b := c.report.Bench
		t.Logf("%s: %d instructions; Compile %v cold, %v cached; Load %.1f µs; getppid %.0f ns bare, %.0f ns filtered; denial via Serve %.1f µs, clone3 ENOSYS %.0f ns",
			name, len(f.BPF)/8, cold.Round(time.Microsecond), cached.Round(time.Microsecond), float64(c.report.LoadNs)/1e3,
			b["getppid_bare_ns"], b["getppid_filtered_ns"], b["notified_denial_ns"]/1e3, b["errno_denial_ns"])
	}
}

func BenchmarkCompileCold(b *testing.B) {
	for _, name := range []string{Denylist, Allowlist} {
		b.Run(name, func(b *testing.B) {
			p := mustBuiltin(b, name)
			for b.Loop() {
				if _, err := compile(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompileCached(b *testing.B) {
	for _, name := range []string{Denylist, Allowlist} {
		b.Run(name, func(b *testing.B) {
			p := mustBuiltin(b, name)
			mustCompile(b, p)
			for b.Loop() {
				mustCompile(b, p)
			}
		})
	}
}

// pythonWorkloads are ordinary programs, in the spirit of what strict is
// for: each must run to "ok" under every built-in policy with not a single
// denial. The syscalls they make are what the allowlist was built from
// (strace -f of the same work).
var pythonWorkloads = map[string]string{
	"data stack": `
import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rng = np.random.default_rng(1)
a = rng.random((300, 300)); np.linalg.eigvals(a[:60, :60]); a @ a.T
df = pd.DataFrame({"x": np.arange(1000), "y": rng.normal(size=1000)})
df.groupby(df.x % 7).y.mean(); df.to_csv("d.csv"); pd.read_csv("d.csv")
fig, ax = plt.subplots(); ax.plot(df.x, df.y); fig.savefig("plot.png")
assert open("plot.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("ok")
`,
	"stdlib": `
import asyncio, concurrent.futures, fcntl, mmap, multiprocessing, os, select, signal
import socket, sqlite3, subprocess, sys, tempfile, threading, time
def sq(x): return x * x
if __name__ == "__main__":
    t = threading.Thread(target=time.sleep, args=(0.01,)); t.start(); t.join()
    assert subprocess.run(["/bin/echo", "hi"], capture_output=True).stdout == b"hi\n"
    subprocess.run("echo shell | cat >/dev/null", shell=True, check=True)
    for m in ("fork", "spawn", "forkserver"):
        with multiprocessing.get_context(m).Pool(2) as p: assert p.map(sq, range(4)) == [0, 1, 4, 9]
    with concurrent.futures.ThreadPoolExecutor(4) as ex: list(ex.map(sq, range(8)))
    with concurrent.futures.ProcessPoolExecutor(2) as ex: list(ex.map(sq, range(8)))
    async def main():
        p = await asyncio.create_subprocess_exec("/bin/true"); await p.wait()
        await asyncio.sleep(0.01)
    asyncio.run(main())
    a, b = socket.socketpair(); a.send(b"x"); b.recv(1)
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    c = socket.create_connection(s.getsockname()); d, _ = s.accept(); c.sendall(b"y"); d.recv(1)
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
    select.select([a], [], [], 0); p = select.poll(); p.register(a); p.poll(0)
    e = select.epoll(); e.register(a); e.poll(0)
    con = sqlite3.connect("db.sqlite"); con.execute("create table t(x)"); con.execute("insert into t values(1)"); con.commit()
    with tempfile.TemporaryDirectory(dir=".") as td:
        f = os.path.join(td, "f"); open(f, "w").write("x"); os.rename(f, f + "2"); os.symlink(f + "2", f)
        os.readlink(f); os.chmod(f + "2", 0o600); os.utime(f + "2"); os.link(f + "2", f + "3"); os.statvfs(td)
        with open(f + "2", "r+b") as h:
            h.write(b"abc"); h.flush(); os.fsync(h.fileno()); mmap.mmap(h.fileno(), 3).close()
            fcntl.flock(h, fcntl.LOCK_EX); fcntl.lockf(h, fcntl.LOCK_UN)
    signal.signal(signal.SIGUSR1, lambda *a: None); os.kill(os.getpid(), signal.SIGUSR1)
    signal.signal(signal.SIGALRM, lambda *a: None); signal.setitimer(signal.ITIMER_REAL, 0.01); time.sleep(0.02)
    r, w = os.pipe(); os.set_blocking(r, False); os.set_inheritable(r, True); os.write(w, b"x"); os.read(r, 1)
    os.sched_getaffinity(0); os.cpu_count(); os.getloadavg(); os.uname(); os.urandom(8); os.getrandom(8)
    print(sys.stdin.isatty(), os.get_blocking(1))
    print("ok")
`,
}

func TestKernelPythonWorkloads(t *testing.T) {
	requireSeccomp(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("no /usr/bin/python3: %v", err)
	}
	for wname, script := range pythonWorkloads {
		t.Run(wname, func(t *testing.T) {
			// A file, not -c: multiprocessing's spawn re-imports __main__.
			path := filepath.Join(t.TempDir(), "workload.py")
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			argv := mustJSON(t, []string{"/usr/bin/python3", path})
			bare := runChild(t, "exec", nil, "SBX_SECCOMP_TEST_ARGV="+argv, "SBX_SECCOMP_TEST_DIR="+t.TempDir())
			if p := bare.report.Payload; p == nil || p.ExitStatus() != 0 || !p.Exited() {
				t.Skipf("the workload fails without a filter (%v), so this host cannot run it:\n%s", p, bare.stderr)
			}
			for _, name := range []string{Allowlist, Denylist} {
				c := runChild(t, "exec", mustCompile(t, mustBuiltin(t, name)), "SBX_SECCOMP_TEST_ARGV="+argv, "SBX_SECCOMP_TEST_DIR="+t.TempDir())
				c.exitedCleanly(t, name)
				if p := c.report.Payload; p == nil || !p.Exited() || p.ExitStatus() != 0 || !strings.HasSuffix(c.stdout, "ok\n") {
					t.Errorf("%s: %s under %s; stdout %q\nstderr:\n%s", wname, describeWS(*p), name, c.stdout, c.stderr)
				}
				if len(c.report.Counts) != 0 {
					t.Errorf("%s under %s: denials %s", wname, name, sortedCounts(countsByName(c.report.Counts)))
				}
			}
		})
	}
}

// TestKernelCPythonSuite runs CPython's own regression tests (Debian's
// libpython3.11-testsuite), those issue 4 names, under each policy: every
// test file that passes without a filter must pass under it. It takes
// minutes, so it runs only with SBX_SECCOMP_CPYTHON_TESTS=1.
func TestKernelCPythonSuite(t *testing.T) {
	if os.Getenv("SBX_SECCOMP_CPYTHON_TESTS") != "1" {
		t.Skip("slow: set SBX_SECCOMP_CPYTHON_TESTS=1 to run CPython's regression tests under each policy")
	}
	requireSeccomp(t)
	if _, err := os.Stat("/usr/lib/python3.11/test/regrtest.py"); err != nil {
		t.Skipf("no CPython test suite (apt-get install libpython3.11-testsuite): %v", err)
	}
	tests := []string{"test_json", "test_re", "test_math", "test_datetime", "test_collections", "test_csv",
		"test_sqlite3", "test_threading", "test_subprocess", "test_tempfile", "test_pathlib", "test_unicode"}
	argv := mustJSON(t, append([]string{"/usr/bin/python3", "-m", "test", "-j2"}, tests...))
	// passed returns the test files regrtest reports as passed.
	passed := func(out string) map[string]bool {
		ok := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			// "0:00:20 load avg: 1.14 [11/12/1] test_re passed (31.2 sec) -- running: ..."
			f := strings.Fields(line)
			for i := 1; i < len(f); i++ {
				if f[i] == "passed" && strings.HasPrefix(f[i-1], "test_") {
					ok[f[i-1]] = true
				}
			}
		}
		return ok
	}
	bare := runChild(t, "exec", nil, "SBX_SECCOMP_TEST_ARGV="+argv, "SBX_SECCOMP_TEST_DIR="+t.TempDir())
	want := passed(bare.stdout)
	t.Logf("without filter %d of %d test files pass", len(want), len(tests))
	for _, name := range []string{Allowlist, Denylist} {
		c := runChild(t, "exec", mustCompile(t, mustBuiltin(t, name)), "SBX_SECCOMP_TEST_ARGV="+argv, "SBX_SECCOMP_TEST_DIR="+t.TempDir())
		got := passed(c.stdout)
		for tf := range want {
			if !got[tf] {
				t.Errorf("%s: %s passes without a filter, not under it", name, tf)
			}
		}
		t.Logf("%s: %d test files pass; denials: %s", name, len(got), sortedCounts(countsByName(c.report.Counts)))
	}
}
