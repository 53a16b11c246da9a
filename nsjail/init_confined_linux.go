package nsjail

import "golang.org/x/sys/unix"

// confinedCall is one syscall the init's locked thread makes after it has
// loaded the payload's filter (init_linux.go, run): every built-in policy
// must allow it, with these arguments, or the init would fail its own work
// (TestPolicyAllowsConfinedInit).
type confinedCall struct {
	Name string
	Args [6]uint64
	Why  string
}

// postConfineSyscalls is what the init itself still does once it is
// confined: ready, the payload, the inputs, the fork and exec, the reaping
// and the workspace report. The Go runtime's own calls on the same thread
// (futex, mmap, signals, ...) are the seccomp package's initBaseline. The
// denial server and the control reader run on the init's other threads,
// which the runtime starts from its template thread, not from this locked
// one (runtime.newm: a locked M hands the clone off), so they are under
// neither the filter nor Landlock, as before.
var postConfineSyscalls = []confinedCall{
	{Name: "write", Why: "status lines (ready, started, exit), the input files, the workspace report"},
	{Name: "read", Why: "the Payload and the input files' bytes on the control pipe; /proc/PID/stat for the task count when the payload ends (countTasks)"},
	{Name: "close", Why: "each input file and each walked directory or file"},
	{Name: "mkdirat", Why: "an input's parent directories in the workspace (os.MkdirAll)"},
	{Name: "newfstatat", Why: "os.MkdirAll and lookPath stat their paths; the walk lstat's each entry"},
	{Name: "fstat", Why: "the walk checks each file it opened"},
	{Name: "openat", Why: "an input file (O_CREAT|O_EXCL|O_NOFOLLOW), the walk's directories and files, /proc and its stat files (countTasks)"},
	{Name: "faccessat", Why: "lookPath checks X_OK on argv[0] (unix.Access)"},
	{Name: "getdents64", Why: "the walk lists each directory; countTasks lists /proc"},
	{Name: "readlinkat", Why: "the walk reports symlinks' targets"},
	{Name: "pread64", Why: "the walk reads each file it sends"},
	{Name: "lseek", Why: "the walk skips holes (SEEK_DATA, SEEK_HOLE)"},
	{Name: "pipe2", Why: "syscall.ForkExec's error pipe"},
	{Name: "clone", Args: [6]uint64{unix.CLONE_VFORK | unix.CLONE_VM | uint64(unix.SIGCHLD)}, Why: "syscall.ForkExec forks the payload (vfork semantics, no namespace flags)"},
	{Name: "setsid", Why: "the payload's first process, before its execve: held there for its rlimits (seccomp.ActHold)"},
	{Name: "chdir", Why: "ForkExec's child enters the workdir"},
	{Name: "dup3", Why: "ForkExec's child moves fds 0-2 into place"},
	{Name: "fcntl", Why: "ForkExec's child clears close-on-exec on fds 0-2"},
	{Name: "execve", Why: "ForkExec's child becomes the payload"},
	{Name: "exit_group", Why: "ForkExec's child on a failed exec; the init's own exit"},
	{Name: "setrlimit", Args: [6]uint64{unix.RLIMIT_NOFILE}, Why: "without a seccomp listener the init lowers its own limits (all but RLIMIT_CORE) just before the fork"},
	{Name: "prlimit64", Args: [6]uint64{0, unix.RLIMIT_CPU}, Why: "the same through glibc-style prlimit(0, ...) (Go's syscall.Setrlimit)"},
	{Name: "wait4", Why: "the init reaps every process of the sandbox"},
	{Name: "kill", Args: [6]uint64{uint64(0xffffffff), uint64(unix.SIGKILL)}, Why: "kill(-1, SIGKILL): once the payload is gone, nothing of the run outlives it"},
	{Name: "socketpair", Args: [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, Why: "the Python runner's and the warm interpreter's handoff socket (init_warm_linux.go, forkDriver)"},
	{Name: "socket", Args: [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK}, Why: "the listener of the Python runner's report (listenReport)"},
	{Name: "bind", Why: "the report's abstract unix address"},
	{Name: "listen", Why: "the report's listener"},
	{Name: "accept4", Why: "the runner's report, once the payload is gone (readReport)"},
	{Name: "getrandom", Why: "the report's address is random"},
	{Name: "getrusage", Args: [6]uint64{uint64(0xffffffff)}, Why: "RUSAGE_CHILDREN: the payload's CPU time and peak RSS"},
	// A warm sandbox's init (init_warm_linux.go) before its ready: the
	// interpreter's fork and handoff socket are the payload's (above),
	// and these.
	{Name: "eventfd2", Args: [6]uint64{0, unix.EFD_CLOEXEC}, Why: "stops the watch of the warm interpreter at the handoff"},
	{Name: "unlinkat", Why: "empties what the preload wrote in the workspace, /tmp and /dev/shm (os.RemoveAll)"},
}
