package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// constAllow is the kernel's seccomp_is_const_allow (kernel/seccomp.c,
// the action cache of Linux 5.11): it runs a filter for one syscall number
// of one arch knowing nothing else, and says whether the program allows
// that syscall whatever its arguments. Such syscalls go into the filter's
// allow bitmap when it is attached, and from then on the kernel allows
// them without running the program at all. The emulation is the
// kernel's own: only loads of nr and arch, constant jumps, AND and
// returns are understood; any other instruction, a load of an argument
// or of the instruction pointer above all, means "not constant".
func constAllow(insns []unix.SockFilter, nr int32, arch uint32) bool {
	var reg uint32
	for pc := 0; pc < len(insns); pc++ {
		in := insns[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			switch in.K {
			case 0: // offsetof(struct seccomp_data, nr)
				reg = uint32(nr)
			case 4: // offsetof(struct seccomp_data, arch)
				reg = arch
			default:
				return false
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K == unix.SECCOMP_RET_ALLOW
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var taken bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				taken = reg == in.K
			case unix.BPF_JGE:
				taken = reg >= in.K
			case unix.BPF_JGT:
				taken = reg > in.K
			case unix.BPF_JSET:
				taken = reg&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			reg &= in.K
		default:
			return false
		}
	}
	return false
}

// hotSyscalls are what a payload calls most: CPython's start (strace -c
// of python3 -S -c pass: ~250 calls, most of them these) and the steady
// state of the usual workloads (numpy and pandas imports, file I/O, the
// Go runtime of a Go payload). None of them has an argument check in any
// built-in policy, and none may get one: then every call of it would run
// the program (1,000 instructions for the allowlist) instead of a bitmap
// test.
var hotSyscalls = []string{
	"read", "write", "pread64", "readv", "writev", "openat", "close", "newfstatat", "fstat", "statx",
	"lseek", "getdents64", "readlink", "access", "getcwd", "fcntl", "dup", "dup3", "pipe2",
	"mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"futex", "sched_yield", "sched_getaffinity", "nanosleep", "clock_gettime", "clock_nanosleep",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getrandom", "sysinfo", "uname",
	"set_tid_address", "set_robust_list", "rseq", "arch_prctl",
	"epoll_pwait", "epoll_ctl", "poll", "wait4", "exit", "exit_group", "execve",
}

// TestHotSyscallsSkipTheFilter: in every filter a run can load (the
// built-in policies and the guard alone), each hot syscall of the native
// ABI is allowed whatever its arguments, so the kernel's action cache
// (Linux 5.11) allows it from its bitmap: the payload pays for the filter's
// length only on the few syscalls whose arguments it checks (ioctl,
// prlimit64, clone, the signal and scheduling calls of the init guard).
// Issue 13 measured what the payload pays inside the sandbox: seccomp's
// share of CPython's start is ~20 ns per syscall, the cached path.
func TestHotSyscallsSkipTheFilter(t *testing.T) {
	arch, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	for _, name := range precompiledPolicies {
		p, err := ForRun(name)
		if err != nil {
			t.Fatal(err)
		}
		f := mustCompile(t, p)
		progs := map[string][]byte{"program": f.BPF}
		if f.Fallback != nil {
			progs["fallback program"] = f.Fallback
		}
		for which, prog := range progs {
			insns, err := decodeBPF(prog)
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range hotSyscalls {
				nr, err := SyscallNumber(sc)
				if err != nil {
					t.Fatalf("%s: %v", sc, err)
				}
				if !constAllow(insns, int32(nr), arch.Native) {
					t.Errorf("policy %s, %s: %s is not allowed whatever its arguments: every call runs the filter's %d instructions instead of the kernel's action cache", p.Name, which, sc, len(insns))
				}
			}
		}
	}
}

// TestConstAllowMatchesTheKernel holds the emulation to the kernel's
// reading on programs of known shape: an argument check is never
// constant, a check of nr alone is.
func TestConstAllowMatchesTheKernel(t *testing.T) {
	const native = unix.AUDIT_ARCH_X86_64
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	// Another arch: kill. nr 39: load args[0] (offset 16) and kill if
	// it is 1. Any other nr: allow.
	prog := []unix.SockFilter{
		ld(4), jeq(native, 0, 5),
		ld(0), jeq(39, 0, 2),
		ld(16), jeq(1, 1, 0),
		ret(unix.SECCOMP_RET_ALLOW),
		ret(unix.SECCOMP_RET_KILL_PROCESS),
	}
	for _, tc := range []struct {
		name string
		nr   int32
		arch uint32
		want bool
	}{
		{"nr alone decides", 0, native, true},
		{"another number", 1000, native, true},
		{"reads args[0]", 39, native, false},
		{"another arch is killed", 0, unix.AUDIT_ARCH_I386, false},
	} {
		if got := constAllow(prog, tc.nr, tc.arch); got != tc.want {
			t.Errorf("%s: constAllow(nr %d, arch %#x) = %v, want %v", tc.name, tc.nr, tc.arch, got, tc.want)
		}
	}
}
