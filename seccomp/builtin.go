package seccomp

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// Names of the built-in policies, as profiles name them. They are
// policyname's, a package without cgo, so that what only names a policy
// (the Spec, the profile parser) builds without libseccomp.
const (
	// Allowlist is strict's policy: only what CPython 3.11 with numpy,
	// pandas and matplotlib (and the sandbox init) need.
	Allowlist = policyname.Allowlist
	// Denylist is standard's policy: everything but the known escape and
	// kernel attack surface.
	Denylist = policyname.Denylist
	// None means no syscall policy: a disabled security layer. A run
	// still loads the init guard (ForRun).
	None = policyname.None
)

// Names lists the policy names Builtin accepts.
func Names() []string { return policyname.All() }

// Builtin returns a fresh copy of the named built-in policy, or nil (and no
// error) for "none".
func Builtin(name string) (*Policy, error) {
	switch name {
	case Allowlist:
		return allowlist(), nil
	case Denylist:
		return denylist(), nil
	case None:
		return nil, nil
	}
	return nil, fmt.Errorf("seccomp: unknown policy %q (known: allowlist, denylist, none)", name)
}

// nsFlags are the clone(2) flags that create namespaces. CLONE_NEWTIME
// (0x80) is missing on purpose: clone(2) reads that bit as part of the exit
// signal, and only clone3 and unshare can create a time namespace.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// ioctl requests from <asm-generic/ioctls.h> that x/sys/unix does not
// name (same values on x86 and arm).
const (
	ioFIONBIO  = 0x5421
	ioFIONCLEX = 0x5450
	ioFIOCLEX  = 0x5451
)

// The socket families a sandbox may use: unix sockets and IP (over lo,
// or through the network allowlist where the profile has one).
var socketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

func denylist() *Policy {
	deny := func(why string, names ...string) Rule {
		return Rule{Names: names, Action: ActNotifyErrno, Why: why}
	}
	return withGuard(&Policy{
		Name:    Denylist,
		Default: ActAllow,
		Rules: []Rule{
			deny("reads, writes or steers another process: the classic way out through a neighbour",
				"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise"),
			deny("changes the mount tree: the jail's view of the filesystem stays as the init built it (fsconfig: CVE-2022-0185)",
				"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick",
				"move_mount", "open_tree", "open_tree_attr", "mount_setattr"),
			deny("enters or creates namespaces: a nested user namespace hands root-only kernel code to the payload",
				"unshare", "setns"),
			{
				Names:  []string{"clone"},
				Action: ActNotifyErrno,
				Args:   []ArgCond{{Arg: 0, Op: OpAnyBit, Mask: nsFlags}},
				Why:    "clone with a CLONE_NEW* flag creates namespaces (threads and fork stay allowed)",
			},
			{
				Names:  []string{"clone3"},
				Action: ActErrno,
				Errno:  int(unix.ENOSYS),
				Why:    "its flags sit in memory the filter cannot read; ENOSYS makes glibc (2.34+) fall back to clone, whose flags it can",
			},
			deny("a second syscall interface (io_uring) or a programmable kernel (bpf, perf): large, often-exploited attack surface",
				"bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register"),
			deny("lets a payload stall kernel page faults at will, which turns kernel races into reliable exploits",
				"userfaultfd"),
			deny("kernel keyrings are not namespaced",
				"keyctl", "add_key", "request_key"),
			deny("loads, replaces or stops the host kernel",
				"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot"),
			deny("host-wide state: swap, process accounting, disk quotas",
				"swapon", "swapoff", "acct", "quotactl", "quotactl_fd"),
			deny("file handles open files by inode, past the mount namespace's view (the 2014 \"shocker\" container breakout)",
				"open_by_handle_at", "name_to_handle_at"),
			deny("raw I/O port access", "iopl", "ioperm"),
			deny("the kernel log leaks host information", "syslog"),
			deny("the clocks are host-wide (time namespaces only offset the monotonic ones)",
				"settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
			{
				Names:  []string{"personality"},
				Action: ActNotifyErrno,
				Args:   []ArgCond{{Arg: 0, Op: OpMixed, Mask: 0xffffffff}},
				Why:    "execution domains and flags like ADDR_NO_RANDOMIZE (no ASLR) or READ_IMPLIES_EXEC; PER_LINUX (0) and the query 0xffffffff stay allowed (personality(2) reads 32 bits)",
			},
			{
				Names:  []string{"ioctl"},
				Action: ActNotifyErrno,
				Args:   []ArgCond{{Arg: 1, Op: OpMaskedIn, Mask: 0xffffffff, Values: []uint64{unix.TIOCSTI, unix.TIOCLINUX}}},
				Why:    "pushes input into a terminal (CVE-2017-5226) or drives the console; the request is an unsigned int, so the upper half is masked off (CVE-2019-10063)",
			},
			{
				Names:  []string{"socket"},
				Action: ActNotifyErrno,
				Args:   []ArgCond{{Arg: 0, Op: OpNotIn, Values: socketFamilies}},
				Why:    "only unix and IP sockets: packet, netlink, vsock, bluetooth, alg ... are kernel surface a payload does not need",
			},
			deny("obsolete or host-global calls nothing modern uses",
				"lookup_dcookie", "vhangup", "nfsservctl", "uselib", "ustat", "sysfs"),
		},
	})
}

func allowlist() *Policy {
	allow := func(why string, names ...string) Rule {
		return Rule{Names: names, Action: ActAllow, Why: why}
	}
	// exceptValue allows names unless argument arg, read as the kernel
	// reads an int (its low 32 bits), is v: the default refuses that
	// case (initGuard says why). Two rules, since a masked "not equal"
	// is "some other bit set, or v's bits not all set" and v has one bit.
	exceptValue := func(why string, arg int, v uint64, base []ArgCond, names ...string) []Rule {
		with := func(c ArgCond) []ArgCond { return append(append([]ArgCond{}, base...), c) }
		return []Rule{
			{Names: names, Action: ActAllow, Args: with(ArgCond{Arg: arg, Op: OpAnyBit, Mask: lowHalf &^ v}), Why: why},
			{Names: names, Action: ActAllow, Args: with(ArgCond{Arg: arg, Op: OpNoBit, Mask: v}), Why: why},
		}
	}
	guarded := slices.Concat(
		exceptValue("signals the sandbox's own processes: its pid namespace holds nothing else but the init (pid 1), which is guarded",
			0, 1, nil, "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"),
		exceptValue("CPU placement and scheduling of the sandbox's own threads; raising priority needs CAP_SYS_NICE; the init (pid 1) is guarded",
			0, 1, nil, "sched_setaffinity", "sched_setparam", "sched_setscheduler", "sched_setattr"),
		exceptValue("nice of a process or process group (os.nice); raising priority needs CAP_SYS_NICE; PRIO_USER and the init (pid 1) are guarded",
			1, 1, []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{unix.PRIO_PROCESS, unix.PRIO_PGRP}}}, "setpriority"),
		exceptValue("the process's own limits; raising a hard limit needs CAP_SYS_RESOURCE; RLIMIT_CORE is guarded",
			0, unix.RLIMIT_CORE, nil, "setrlimit"),
		exceptValue("the process's own limits (pid 0: glibc's getrlimit and setrlimit); RLIMIT_CORE is guarded",
			1, unix.RLIMIT_CORE, []ArgCond{{Arg: 0, Op: OpNoBit, Mask: lowHalf}}, "prlimit64"),
		[]Rule{{
			Names:  []string{"prlimit64"},
			Action: ActAllow,
			Args:   []ArgCond{{Arg: 2, Op: OpIn, Values: []uint64{0}}},
			Why:    "reads any process's limits (no new limit given)",
		}},
	)
	return withGuard(&Policy{
		Name:         Allowlist,
		Default:      ActNotifyErrno,
		DefaultErrno: int(unix.EPERM),
		Rules: append([]Rule{
			{
				Names:  []string{"clone3"},
				Action: ActErrno,
				Errno:  int(unix.ENOSYS),
				Why:    "its flags sit in memory the filter cannot read; ENOSYS makes glibc (2.34+) fall back to clone, whose flags it can",
			},
			allow("runs programs; with no_new_privs set, exec gains nothing from setuid bits or file capabilities",
				"execve", "execveat"),
			allow("creates processes (subprocess, multiprocessing); the pids limit bounds them",
				"fork", "vfork"),
			{
				Names:  []string{"clone"},
				Action: ActAllow,
				Args:   []ArgCond{{Arg: 0, Op: OpNoBit, Mask: nsFlags}},
				Why:    "threads and processes (glibc, the Go runtime, the init forking the payload), but no CLONE_NEW* namespaces",
			},
			allow("ends and reaps processes", "exit", "exit_group", "wait4", "waitid", "restart_syscall"),
			allow("signals through a pidfd the process holds (pidfd_open refuses the init's)", "pidfd_send_signal"),
			allow("signal handling, timers and alarms (signal, faulthandler, the Go runtime's preemption)",
				"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
				"sigaltstack", "signalfd", "signalfd4", "pause", "alarm", "setitimer", "getitimer",
				"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete"),
			allow("process and thread identity, process groups and sessions inside the sandbox (setsid: the init guard holds it, then lets it run)",
				"getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "setpgid",
				"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "capget"),
			allow("switches between ids the process already holds; without capabilities the kernel allows nothing more (subprocess user=, group=)",
				"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups"),
			allow("threads and their synchronisation (pthreads, the Go runtime)",
				"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv", "membarrier", "arch_prctl"),
			allow("CPU placement and priority of the sandbox's own threads, read",
				"sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
				"sched_get_priority_min", "sched_rr_get_interval", "sched_getattr", "getpriority", "getcpu"),
			allow("manages the process's own memory (OpenBLAS uses mbind); the memory cgroup bounds it",
				"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore",
				"mlock", "mlock2", "munlock", "mlockall", "munlockall",
				"mbind", "get_mempolicy", "set_mempolicy", "memfd_create", "pkey_alloc", "pkey_free", "pkey_mprotect"),
			allow("reads and writes open files, pipes and sockets",
				"read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2",
				"lseek", "sendfile", "copy_file_range", "splice", "tee", "fadvise64", "readahead"),
			allow("opens and closes files and manages descriptors",
				"open", "openat", "openat2", "creat", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "flock"),
			allow("looks at the filesystem: the mount plan decides what there is to see",
				"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
				"readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "umask"),
			allow("changes files; only the workspace and /tmp are writable, the rest is mounted read-only",
				"mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "unlink", "unlinkat",
				"link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2",
				"chown", "fchown", "lchown", "fchownat", "truncate", "ftruncate", "fallocate",
				"utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
				"fsync", "fdatasync", "syncfs", "sync_file_range"),
			allow("extended attributes (shutil.copystat copies them)",
				"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
				"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"),
			allow("pipes, event fds and waiting on descriptors (selectors, asyncio, the Go netpoller)",
				"pipe", "pipe2", "eventfd", "eventfd2", "poll", "ppoll", "select", "pselect6",
				"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
				"timerfd_create", "timerfd_settime", "timerfd_gettime"),
			{
				Names:  []string{"socket"},
				Action: ActAllow,
				Args:   []ArgCond{{Arg: 0, Op: OpIn, Values: socketFamilies}},
				Why:    "unix and IP sockets only (strict has no network: IP reaches lo at most)",
			},
			{
				Names:  []string{"socketpair"},
				Action: ActAllow,
				Args:   []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{unix.AF_UNIX}}},
				Why:    "connected unix socket pairs (multiprocessing, asyncio)",
			},
			allow("uses sockets it was allowed to create",
				"bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
				"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt"),
			{
				Names:  []string{"ioctl"},
				Action: ActAllow,
				Args: []ArgCond{{Arg: 1, Op: OpIn, Values: []uint64{
					unix.TCGETS, unix.TCSETS, unix.TCSETSW, unix.TCSETSF, unix.TIOCGWINSZ, unix.TIOCGPGRP,
					unix.TIOCINQ, ioFIONBIO, ioFIONCLEX, ioFIOCLEX, unix.SIOCGIFINDEX, unix.SIOCGIFNAME,
				}}},
				Why: "the requests CPython uses: isatty and termios, the terminal size, FIONREAD, non-blocking and close-on-exec flags, interface name/index; no TIOCSTI or TIOCLINUX",
			},
			{
				Names:  []string{"ioctl"},
				Action: ActAllow,
				Args: []ArgCond{{Arg: 1, Op: OpIn, Values: []uint64{
					unix.TIOCGPTN, unix.TIOCSPTLCK, unix.TIOCGPTPEER, unix.TIOCSCTTY, unix.TIOCNOTTY,
					unix.TIOCSWINSZ, unix.TIOCSPGRP, unix.TIOCGSID, unix.TCSBRK, unix.TCFLSH, unix.TCXONC,
				}}},
				Why: "pseudo-terminals of the sandbox's own devpts (os.openpty, pty.spawn, tty, termios): open and unlock one (TIOCGPTN, TIOCSPTLCK, TIOCGPTPEER), make it the controlling terminal of a new session (TIOCSCTTY; stealing another session's needs CAP_SYS_ADMIN) or drop it, its size, foreground group and session, tcdrain/tcsendbreak, tcflush, tcflow; still no TIOCSTI or TIOCLINUX",
			},
			{
				Names:  []string{"prctl"},
				Action: ActAllow,
				Args: []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{
					unix.PR_SET_PDEATHSIG, unix.PR_GET_PDEATHSIG, unix.PR_GET_DUMPABLE, unix.PR_SET_NAME, unix.PR_GET_NAME,
					unix.PR_GET_SECCOMP, unix.PR_CAPBSET_READ, unix.PR_GET_SECUREBITS, unix.PR_GET_TIMERSLACK,
					unix.PR_SET_CHILD_SUBREAPER, unix.PR_GET_CHILD_SUBREAPER, unix.PR_SET_NO_NEW_PRIVS, unix.PR_GET_NO_NEW_PRIVS,
					unix.PR_GET_THP_DISABLE, unix.PR_GET_SPECULATION_CTRL, unix.PR_SET_VMA,
				}}},
				Why: "harmless process options: names, parent-death signal, subreaper, no_new_privs, queries; PR_SET_VMA names memory (the Go runtime)",
			},
			{
				Names:  []string{"personality"},
				Action: ActAllow,
				Args:   []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{0, 0xffffffff}}},
				Why:    "only PER_LINUX (0) and the query 0xffffffff: no other execution domain, no ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC",
			},
			allow("clocks, sleeping and CPU times", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
				"gettimeofday", "time", "times"),
			allow("resource usage and limits, read", "getrusage", "getrlimit", "sysinfo", "uname"),
			allow("random numbers (os.urandom, hash seeds, the Go runtime)", "getrandom"),
		}, guarded...),
	})
}
