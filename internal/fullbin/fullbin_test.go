package fullbin

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/initbin"
)

// The tests run this test binary in a child (role in roleEnv) that hands
// off, as the lean sbx does, to the test binary itself: the image is
// the child's own /proc/self/exe, and the process exec'd from the memfd
// (roleRan) reports what it got.
const roleEnv = "SBX_FULLBIN_TEST_ROLE"

const (
	roleHandOff   = "hand-off"        // Exec's path with a real image
	roleNoMemfd   = "no-memfd"        // the same under a filter refusing memfd_create
	roleNoExec    = "no-exec"         // the same under a filter refusing execveat
	roleRan       = "ran-from-memfd"  // the process the hand-off exec'd
	ranArg        = "--handed-off-to" // its argv[1], to tell argv passes
	stdinLine     = "stdin is the caller's\n"
	extraFDNumber = 3 // an fd the caller passes (cmd.ExtraFiles[0])
)

// embedded is bytes this test binary embeds, as the lean sbx embeds the
// full one: the copy that the exec'd process makes of them must be a
// sendfile from /proc/self/exe, its memfd.
//
//go:embed fullbin.go
var embedded []byte

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case roleHandOff:
		handOffToSelf()
	case roleNoMemfd:
		refuse(unix.SYS_MEMFD_CREATE, unix.EPERM)
		handOffToSelf()
	case roleNoExec:
		refuse(unix.SYS_EXECVEAT, unix.EACCES)
		handOffToSelf()
	case roleRan:
		reportFromMemfd()
	}
	os.Exit(3)
}

// handOffToSelf is Exec with this test binary as the image; it prints
// the error if it returns.
func handOffToSelf() {
	img, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	env := []string{roleEnv + "=" + roleRan} // not the caller's role: that would hand off again, forever
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, roleEnv+"=") {
			env = append(env, kv)
		}
	}
	err = execImage(img, []string{"sbx", ranArg, "serve"}, env)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(125)
}

// refuse installs a seccomp filter that fails syscall nr with errno, on
// every thread (SECCOMP_FILTER_FLAG_TSYNC), as a host's policy would. It
// does not check the architecture: the child makes no syscall of another
// ABI.
func refuse(nr uintptr, errno unix.Errno) {
	runtime.LockOSThread()
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(nr)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_NO_NEW_PRIVS):", err)
		os.Exit(4)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Fprintln(os.Stderr, "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC):", e)
		os.Exit(4)
	}
}

// ran is what the process exec'd from the memfd reports.
type ran struct {
	Argv     []string `json:"argv"`
	Exe      string   `json:"exe"`
	Seals    int      `json:"seals"`
	SealsErr string   `json:"seals_err,omitempty"`
	Stdin    string   `json:"stdin"`
	ExtraFD  bool     `json:"extra_fd"`
	Memfds   []string `json:"memfds"` // fds of memfds it holds: none leaked
	Copy     string   `json:"copy"`   // how its own SealedCopy filled a memfd
	CopyErr  string   `json:"copy_err,omitempty"`
	CopyWhy  string   `json:"copy_why,omitempty"`
}

func reportFromMemfd() {
	r := ran{Argv: os.Args}
	r.Exe, _ = os.Readlink("/proc/self/exe")
	if fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		r.SealsErr = err.Error()
	} else {
		r.Seals, err = unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil {
			r.SealsErr = err.Error()
		}
		unix.Close(fd)
	}
	b := make([]byte, len(stdinLine))
	n, _ := os.Stdin.Read(b)
	r.Stdin = string(b[:n])
	_, err := unix.FcntlInt(extraFDNumber, unix.F_GETFD, 0)
	r.ExtraFD = err == nil
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(l, "/memfd:") {
			r.Memfds = append(r.Memfds, e.Name()+" "+l)
		}
	}
	// What the full sbx does for its sandboxes' sbx-init: copy bytes it
	// embeds from /proc/self/exe, which is now the memfd.
	m, err := initbin.SealedCopy("sbx-init-test", embedded)
	if err != nil {
		r.CopyErr = err.Error()
	} else {
		unix.Close(m.FD)
	}
	r.Copy, r.CopyWhy = string(m.Copy), m.CopyWhy
	json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

// child runs this test binary in role, with the caller's stdin and an
// extra fd as the lean sbx's caller would give them.
func child(t *testing.T, role string) (stdout, stderr string, code int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.Stdin = strings.NewReader(stdinLine)
	cmd.ExtraFiles = []*os.File{r}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

const allSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// TestExecFromSealedMemfd: the hand-off execs the image from a memfd
// sealed against writes (CVE-2019-5736), with the argv it was given, the
// caller's stdin and fds untouched and no fd of the memfd left open; and
// the exec'd process, whose /proc/self/exe is that memfd, still copies
// the bytes it embeds by sendfile from it (as the full sbx does for
// sbx-init).
func TestExecFromSealedMemfd(t *testing.T) {
	stdout, stderr, code := child(t, roleHandOff)
	if code != 0 {
		t.Fatalf("hand-off: exit %d\n%s%s", code, stdout, stderr)
	}
	var r ran
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q (stderr %s)", err, stdout, stderr)
	}
	if want := "/memfd:" + MemfdName + " (deleted)"; r.Exe != want {
		t.Errorf("/proc/self/exe is %q, want %q", r.Exe, want)
	}
	if r.SealsErr != "" || r.Seals&allSeals != allSeals {
		t.Errorf("F_GET_SEALS of /proc/self/exe = %#x %s, want %#x set", r.Seals, r.SealsErr, allSeals)
	}
	if want := []string{"sbx", ranArg, "serve"}; strings.Join(r.Argv, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("argv %q, want %q", r.Argv, want)
	}
	if r.Stdin != stdinLine {
		t.Errorf("stdin gave %q, want %q: the hand-off read it", r.Stdin, stdinLine)
	}
	if !r.ExtraFD {
		t.Errorf("fd %d the caller passed is closed", extraFDNumber)
	}
	if len(r.Memfds) != 0 {
		t.Errorf("the exec'd process holds memfds %v: the hand-off's fd leaked", r.Memfds)
	}
	if r.CopyErr != "" || r.Copy != string(initbin.CopySendfile) {
		t.Errorf("SealedCopy from a process run from a memfd: %q %s (sendfile failed: %s), want %q", r.Copy, r.CopyErr, r.CopyWhy, initbin.CopySendfile)
	}
}

// TestExecFailureNamesTheStep: where the host refuses the memfd or the
// exec (here a seccomp filter of the caller, as a container runtime's
// profile, an LSM or vm.memfd_noexec=2 would), Exec returns an error
// that names the step, its arguments and errno, and what it means.
func TestExecFailureNamesTheStep(t *testing.T) {
	for _, tc := range []struct {
		role string
		want []string
	}{
		{roleNoMemfd, []string{
			"copying the full sbx (",
			`memfd_create("sbx", MFD_CLOEXEC|MFD_ALLOW_SEALING|MFD_EXEC): operation not permitted`,
			"a seccomp filter or an LSM policy of this process refuses memfd_create(2)",
		}},
		{roleNoExec, []string{
			"running the full sbx (",
			`execveat(memfd 1`, // fdFloor, 100 or above
			`"", ["sbx" "--handed-off-to" "serve"], AT_EMPTY_PATH): permission denied`,
			"this host refuses to exec from a memfd: an LSM policy, or vm.memfd_noexec=2",
		}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			stdout, stderr, code := child(t, tc.role)
			if code != 125 {
				t.Fatalf("exit %d, want 125 (the hand-off failed)\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not say %q", stderr, w)
				}
			}
		})
	}
}

// TestExecWithoutImage: a build that embeds no full sbx says so.
func TestExecWithoutImage(t *testing.T) {
	if Embedded() {
		t.Skip("built with sbx_embedfull")
	}
	err := Exec([]string{"sbx", "serve"}, nil)
	if err == nil || !strings.Contains(err.Error(), "embeds no full sbx") {
		t.Errorf("Exec without an image = %v", err)
	}
	if err := Probe([]string{"serve", "--help"}, "x"); err == nil {
		t.Error("Probe without an image: no error")
	}
}

// TestMeaning: the errnos that say what to do on this host.
func TestMeaning(t *testing.T) {
	for _, tc := range []struct {
		err  error
		s    step
		want string
	}{
		{unix.EACCES, stepMemfd, "vm.memfd_noexec=2"},
		{unix.EPERM, stepMemfd, "seccomp filter or an LSM"},
		{fmt.Errorf("write memfd: %w", unix.ENOSPC), stepMemfd, "not enough memory"},
		{unix.EMFILE, stepMemfd, "file descriptors"},
		{unix.EACCES, stepExec, "refuses to exec from a memfd"},
		{unix.ENOSYS, stepExec, "execveat(2)"},
		{unix.EIO, stepExec, ""},
	} {
		got := meaning(tc.err, tc.s)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("meaning(%v, %d) = %q, want %q in it", tc.err, tc.s, got, tc.want)
		}
	}
}
