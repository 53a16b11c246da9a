package seccomp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// call is one syscall invocation: a name and its arguments.
type call struct {
	name string
	args [6]uint64
}

func (c call) String() string { return fmt.Sprintf("%s%#x", c.name, c.args) }

func c(name string, args ...uint64) call {
	var cl call
	cl.name = name
	copy(cl.args[:], args)
	return cl
}

const (
	threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	forkFlags  = unix.CLONE_CHILD_CLEARTID | unix.CLONE_CHILD_SETTID | uint64(unix.SIGCHLD)
	vforkFlags = unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)
)

// initBaseline is what the sandbox init (a Go program) and a starting
// CPython do once the filter is on: every built-in policy must allow it.
// The Go part was read off strace of an init-like program (fork+exec from
// a locked thread, wait4, GC, goroutines); the kernel tests run it too.
var initBaseline = []call{
	c("execve"), c("exit_group"), c("exit"), c("wait4"), c("waitid"), c("kill"), c("tgkill"),
	c("futex"), c("clone", threadFlags), c("clone", forkFlags), c("clone", vforkFlags),
	c("mmap"), c("munmap"), c("madvise"), c("mprotect"), c("brk"),
	c("rt_sigaction"), c("rt_sigprocmask"), c("rt_sigreturn"), c("sigaltstack"),
	c("nanosleep"), c("sched_yield"), c("sched_getaffinity"), c("epoll_pwait"), c("epoll_ctl"), c("epoll_create1"), c("eventfd2"),
	c("getpid"), c("gettid"), c("getppid"), c("read"), c("write"), c("close"), c("pipe2"), c("fcntl"), c("dup3"),
	c("setsid"), c("chdir"), c("getrusage"), c("prlimit64"), c("openat"), c("pread64"), c("newfstatat"),
	c("clock_gettime"), c("getrandom"), c("arch_prctl"), c("set_tid_address"), c("set_robust_list"), c("rseq"),
	c("prctl", unix.PR_SET_VMA, unix.PR_SET_VMA_ANON_NAME), c("prctl", unix.PR_SET_PDEATHSIG, uint64(unix.SIGKILL)),
	c("ioctl", 0, unix.TCGETS), c("ioctl", 3, ioFIOCLEX), c("getdents64"), c("lseek"), c("readlink"), c("getcwd"),
	c("socket", unix.AF_UNIX, unix.SOCK_STREAM), c("socket", unix.AF_INET, unix.SOCK_DGRAM), c("socket", unix.AF_INET6, unix.SOCK_STREAM),
	c("personality", 0xffffffff),
}

// Persona flags from <linux/personality.h>.
const (
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
)

// escapes are what no built-in policy may allow.
var escapes = []call{
	c("ptrace"), c("process_vm_readv"), c("process_vm_writev"), c("bpf"), c("mount"), c("umount2"), c("pivot_root"),
	c("fsopen"), c("move_mount"), c("open_tree"), c("unshare", unix.CLONE_NEWUSER), c("unshare", 0), c("setns"),
	c("clone", unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), c("clone", unix.CLONE_NEWNS), c("clone", threadFlags|unix.CLONE_NEWNET),
	c("clone", unix.CLONE_NEWPID|1<<40), c("clone3"),
	c("kexec_load"), c("kexec_file_load"), c("init_module"), c("finit_module"), c("delete_module"), c("reboot"),
	c("io_uring_setup"), c("io_uring_enter"), c("io_uring_register"), c("userfaultfd"), c("perf_event_open"),
	c("keyctl"), c("add_key"), c("request_key"), c("open_by_handle_at"), c("iopl"), c("ioperm"), c("syslog"),
	c("settimeofday"), c("clock_settime"), c("adjtimex"), c("swapon"), c("acct"),
	c("ioctl", 0, unix.TIOCSTI), c("ioctl", 7, unix.TIOCSTI|1<<32), c("ioctl", 0, unix.TIOCLINUX), c("ioctl", 0, unix.TIOCLINUX|0xdead<<32),
	c("socket", unix.AF_PACKET, unix.SOCK_RAW), c("socket", unix.AF_NETLINK), c("socket", unix.AF_VSOCK), c("socket", unix.AF_BLUETOOTH),
	c("socket", unix.AF_ALG), c("socket", unix.AF_INET|1<<32), c("socket", 0), c("socket", math.MaxUint64),
	c("personality", addrNoRandomize), c("personality", 8), c("personality", 0xffffffff&^readImpliesExec), c("personality", addrNoRandomize|1<<32),
}

func TestBuiltinsValidate(t *testing.T) {
	for _, name := range []string{Allowlist, Denylist} {
		p, err := Builtin(name)
		if err != nil || p == nil || p.Name != name {
			t.Fatalf("Builtin(%q) = %v, %v", name, p, err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if p, err := Builtin(None); p != nil || err != nil {
		t.Errorf("Builtin(none) = %v, %v; want nil, nil", p, err)
	}
	if _, err := Builtin("blocklist"); err == nil {
		t.Error("Builtin(blocklist): no error")
	}
	for _, n := range Names() {
		if _, err := Builtin(n); err != nil {
			t.Errorf("Names() has %q, which Builtin refuses: %v", n, err)
		}
	}
	// Builtin hands out copies: changing one must not change the next.
	p, _ := Builtin(Denylist)
	p.Rules[0].Names[0] = "getpid"
	if q, _ := Builtin(Denylist); q.Rules[0].Names[0] != "ptrace" {
		t.Error("Builtin returns shared policy data")
	}
}

// TestBuiltinProperties holds every built-in policy, as data, to the
// security invariants; TestCompiledMatchesPolicy then holds the compiled
// programs to the data, and the kernel tests the kernel to both.
func TestBuiltinProperties(t *testing.T) {
	for _, name := range []string{Allowlist, Denylist} {
		p, _ := Builtin(name)
		t.Run(name, func(t *testing.T) {
			for _, cl := range initBaseline {
				// A hold (the init's, on setsid) lets the call run.
				if o := p.decide(cl.name, cl.args); o.Action != ActAllow && o.Action != ActHold {
					t.Errorf("baseline %v: %s %d, want allow", cl, o.Action, o.Errno)
				}
			}
			for _, cl := range escapes {
				o := p.decide(cl.name, cl.args)
				if o.Action == ActAllow {
					t.Errorf("escape %v allowed", cl)
				}
				want := int(unix.EPERM)
				if cl.name == "clone3" {
					want = int(unix.ENOSYS)
				}
				if o.Errno != want {
					t.Errorf("escape %v: %s errno %d, want errno %d", cl, o.Action, o.Errno, want)
				}
				// Denials are reported, except clone3's ENOSYS, which is
				// glibc probing, not the payload's intent.
				if wantAct := map[bool]Action{true: ActErrno, false: ActNotifyErrno}[cl.name == "clone3"]; o.Action != wantAct {
					t.Errorf("escape %v: action %s, want %s", cl, o.Action, wantAct)
				}
			}
		})
	}
}

// reachInit are calls that would reach the sandbox's init (pid 1, or by
// prlimit any other pid) or its RLIMIT_CORE: every policy a run loads
// refuses each (initGuard). The pid is an int, so its upper half must
// not matter (1<<32|1 is pid 1 to the kernel).
var reachInit = []call{
	c("prlimit64", 1, unix.RLIMIT_NOFILE, 0x7000), c("prlimit64", 7, unix.RLIMIT_CPU, 0x7000), c("prlimit64", 1<<32|1, unix.RLIMIT_AS, 0x7000),
	c("prlimit64", 0, unix.RLIMIT_CORE, 0x7000), c("prlimit64", 0, unix.RLIMIT_CORE|1<<32, 0x7000), c("prlimit64", 1<<32, unix.RLIMIT_CORE, 0x7000),
	c("setrlimit", unix.RLIMIT_CORE, 0x7000), c("setrlimit", unix.RLIMIT_CORE|1<<32, 0x7000),
	c("kill", 1, uint64(unix.SIGTERM)), c("kill", 1, 0), c("kill", 1<<32|1, uint64(unix.SIGXCPU)), c("rt_sigqueueinfo", 1, 34, 0x7000),
	c("pidfd_open", 1), c("pidfd_open", 0xffffffff00000001),
	c("sched_setaffinity", 1, 8, 0x7000), c("sched_setscheduler", 1, 5, 0x7000), c("sched_setparam", 1<<32|1, 0x7000), c("sched_setattr", 1, 0x7000),
	c("setpriority", unix.PRIO_PROCESS, 1, 19), c("setpriority", unix.PRIO_PGRP, 1<<32|1, 19), c("setpriority", unix.PRIO_USER, 0, 19), c("setpriority", unix.PRIO_USER|1<<32, 1000, 19),
}

// reachInitQuietly are refused silently with ESRCH (the init's own runtime
// makes such calls from its filtered thread).
var reachInitQuietly = []call{
	c("tgkill", 1, 5, uint64(unix.SIGKILL)), c("tgkill", 1<<32|1, 5, uint64(unix.SIGKILL)), c("tkill", 1, uint64(unix.SIGTERM)), c("rt_tgsigqueueinfo", 1, 1, 34, 0x7000),
}

// notInit are the same calls aimed elsewhere: every policy allows them.
var notInit = []call{
	c("prlimit64", 0, unix.RLIMIT_NOFILE, 0x7000, 0x7100), c("prlimit64", 0, unix.RLIMIT_CPU, 0x7000), c("prlimit64", 1, unix.RLIMIT_NOFILE, 0, 0x7100),
	c("prlimit64", 7, unix.RLIMIT_CORE, 0, 0x7100), c("setrlimit", unix.RLIMIT_NOFILE, 0x7000), c("setrlimit", unix.RLIMIT_AS, 0x7000),
	c("kill", 7, uint64(unix.SIGTERM)), c("kill", 0, uint64(unix.SIGTERM)), c("kill", math.MaxUint64, uint64(unix.SIGKILL)), c("kill", 2, 0), c("kill", 3, 0),
	c("tgkill", 7, 8, uint64(unix.SIGTERM)), c("tkill", 8, uint64(unix.SIGTERM)), c("rt_sigqueueinfo", 7, 34, 0x7000), c("pidfd_open", 7),
	c("sched_setaffinity", 0, 8, 0x7000), c("sched_setaffinity", 7, 8, 0x7000), c("sched_setscheduler", 0, 3, 0x7000),
	c("setpriority", unix.PRIO_PROCESS, 0, 10), c("setpriority", unix.PRIO_PROCESS, 7, 10), c("setpriority", unix.PRIO_PGRP, 0, 10),
}

func TestInitGuard(t *testing.T) {
	for _, name := range Names() {
		p, err := ForRun(name)
		if err != nil || p == nil {
			t.Fatalf("ForRun(%q) = %v, %v", name, p, err)
		}
		t.Run(name, func(t *testing.T) {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, cl := range reachInit {
				if o := p.decide(cl.name, cl.args); o.Action != ActNotifyErrno || o.Errno != int(unix.EPERM) {
					t.Errorf("%v: %s %d, want a reported EPERM", cl, o.Action, o.Errno)
				}
			}
			for _, cl := range reachInitQuietly {
				if o := p.decide(cl.name, cl.args); o.Action != ActErrno || o.Errno != int(unix.ESRCH) {
					t.Errorf("%v: %s %d, want a silent ESRCH", cl, o.Action, o.Errno)
				}
			}
			for _, cl := range notInit {
				if o := p.decide(cl.name, cl.args); o.Action != ActAllow {
					t.Errorf("%v: %s %d, want allow", cl, o.Action, o.Errno)
				}
			}
			// The payload's first process is held at its setsid, so that
			// the init can set its rlimits (nsjail/init_rlimits_linux.go).
			if o := p.decide("setsid", [6]uint64{}); o.Action != ActHold {
				t.Errorf("setsid: %s, want hold", o.Action)
			}
			// The compiled program agrees with the data on each.
			f := mustCompile(t, p)
			if nr, _ := SyscallNumber("setsid"); !f.Notify || !f.IsHold(nr) || f.IsHold(nr+1) {
				t.Errorf("filter notify %v, holds %v: want setsid (%d) alone", f.Notify, f.Holds, nr)
			}
			calls := slices.Concat(reachInit, reachInitQuietly, notInit, initBaseline)
			checkCalls(t, p, f.BPF, f.Notify, calls)
			if f.Notify {
				checkCalls(t, p, f.Fallback, false, calls)
			}
		})
	}
	if g, _ := ForRun(None); g.Name != Guard || g.Default != ActAllow {
		t.Errorf("ForRun(none) = policy %q default %s, want %q allowing the rest", g.Name, g.Default, Guard)
	}
}

func TestAllowlistIsStricter(t *testing.T) {
	strict, _ := Builtin(Allowlist)
	std, _ := Builtin(Denylist)
	// Every syscall the allowlist names at all must be one the denylist
	// lets through in the same form, except the ones the denylist takes
	// apart by argument.
	for _, r := range strict.Rules {
		if r.Action != ActAllow || len(r.Args) > 0 {
			continue
		}
		for _, n := range r.Names {
			if o := std.decide(n, [6]uint64{}); o.Action != ActAllow {
				t.Errorf("allowlist allows %s, which the denylist refuses (%s)", n, o.Action)
			}
		}
	}
	for _, cl := range []call{c("inotify_init1"), c("mq_open"), c("shmget"), c("seccomp"), c("landlock_create_ruleset"), c("sync")} {
		if o := strict.decide(cl.name, cl.args); o != (outcome{ActNotifyErrno, int(unix.EPERM)}) {
			t.Errorf("allowlist: %v is %v, want notify-errno EPERM by default", cl, o)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	ok := func() Policy {
		return Policy{Name: "t", Default: ActAllow, Rules: []Rule{{Names: []string{"ptrace"}, Action: ActNotifyErrno, Why: "w"}}}
	}
	tests := []struct {
		name string
		edit func(p *Policy)
		want string
	}{
		{"no name", func(p *Policy) { p.Name = "" }, "no name"},
		{"bad default", func(p *Policy) { p.Default = "deny" }, `default action "deny" unknown`},
		{"default errno with allow", func(p *Policy) { p.DefaultErrno = 1 }, "errno 1 given for action allow"},
		{"no names", func(p *Policy) { p.Rules[0].Names = nil }, "no syscall names"},
		{"no why", func(p *Policy) { p.Rules[0].Why = " " }, "no reason"},
		{"bad action", func(p *Policy) { p.Rules[0].Action = "trap" }, `action "trap" unknown`},
		{"errno too big", func(p *Policy) { p.Rules[0].Errno = 5000 }, "errno 5000 out of range"},
		{"same as default", func(p *Policy) { p.Rules[0].Action = ActAllow }, "same as the policy's default"},
		{"notify same as notify default", func(p *Policy) {
			p.Default, p.DefaultErrno = ActNotifyErrno, 1
			p.Rules[0].Errno = 38
		}, "same as the policy's default"},
		{"errno equal to fallback default", func(p *Policy) {
			p.Default = ActNotifyErrno
			p.Rules[0].Action = ActErrno
		}, "same as the policy's default"},
		{"arg out of range", func(p *Policy) { p.Rules[0].Args = []ArgCond{{Arg: 6, Op: OpIn, Values: []uint64{1}}} }, "arguments 0 to 5"},
		{"arg twice", func(p *Policy) {
			p.Rules[0].Args = []ArgCond{{Arg: 1, Op: OpIn, Values: []uint64{1}}, {Arg: 1, Op: OpNotIn, Values: []uint64{2}}}
		}, "arg 1 tested twice"},
		{"unknown op", func(p *Policy) { p.Rules[0].Args = []ArgCond{{Arg: 0, Op: "lt", Values: []uint64{1}}} }, `unknown op "lt"`},
		{"in without values", func(p *Policy) { p.Rules[0].Args = []ArgCond{{Arg: 0, Op: OpIn}} }, "no values"},
		{"masked value outside mask", func(p *Policy) {
			p.Rules[0].Args = []ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: 0xff, Values: []uint64{0x100}}}
		}, "can never match"},
		{"mixed one bit", func(p *Policy) { p.Rules[0].Args = []ArgCond{{Arg: 0, Op: OpMixed, Mask: 4}} }, "at least two bits"},
		{"not-in wide gap", func(p *Policy) { p.Rules[0].Args = []ArgCond{{Arg: 0, Op: OpNotIn, Values: []uint64{0, 1000}}} }, "one by one"},
		{"two answers", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Names: []string{"ptrace"}, Action: ActErrno, Errno: 38, Args: []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{1}}}, Why: "w"})
		}, "ptrace is also notify-errno 1"},
		{"unconditional hides conditional", func(p *Policy) {
			p.Default = ActNotifyErrno
			p.Rules = []Rule{
				{Names: []string{"ioctl"}, Action: ActAllow, Why: "w"},
				{Names: []string{"ioctl"}, Action: ActErrno, Errno: 1, Args: []ArgCond{{Arg: 1, Op: OpIn, Values: []uint64{unix.TIOCSTI}}}, Why: "w"},
			}
		}, "unconditional allow hides conditional errno"},
		{"listed twice", func(p *Policy) { p.Rules[0].Names = []string{"ptrace", "bpf", "ptrace"} }, "ptrace listed twice"},
	}
	base := ok()
	if err := base.Validate(); err != nil {
		t.Fatalf("base policy: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok()
			tc.edit(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := (*Policy)(nil).Validate(); err == nil {
		t.Error("nil policy validates")
	}
}

// holds evaluates one libseccomp comparison in Go.
func (a atom) holds(args [6]uint64) bool {
	v := args[a.Arg]
	switch a.Cmp {
	case cmpEq:
		return v == a.Value
	case cmpLt:
		return v < a.Value
	case cmpGt:
		return v > a.Value
	case cmpMaskedEq:
		return v&a.Mask == a.Value
	}
	panic("unknown cmp")
}

// probeValues are argument values worth trying against a condition: its
// own values, their neighbours, the mask's bits, with and without junk in
// the upper half, plus random ones.
func probeValues(c ArgCond, rng *rand.Rand) []uint64 {
	vs := []uint64{0, 1, 2, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63}
	seeds := append([]uint64{c.Mask, ^c.Mask}, c.Values...)
	for m := c.Mask; m != 0; m &= m - 1 {
		b := m & -m
		seeds = append(seeds, b, c.Mask&^b)
	}
	for _, s := range seeds {
		vs = append(vs, s, s-1, s+1, s|1<<32, s|0xdead<<40, s&math.MaxUint32)
	}
	for range 64 {
		vs = append(vs, rng.Uint64(), rng.Uint64()&c.Mask, rng.Uint64N(64))
	}
	return vs
}

// TestConditionExpansion checks each Op's expansion into libseccomp
// comparisons against the Op's meaning, without libseccomp.
func TestConditionExpansion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	conds := []ArgCond{
		{Arg: 0, Op: OpIn, Values: []uint64{1, 2, 10}},
		{Arg: 0, Op: OpNotIn, Values: []uint64{1, 2, 10}},
		{Arg: 2, Op: OpNotIn, Values: []uint64{0, 3, 7}},
		{Arg: 2, Op: OpNotIn, Values: []uint64{math.MaxUint64 - 2, math.MaxUint64}},
		{Arg: 1, Op: OpNotIn, Values: []uint64{5, 5, 70}},
		{Arg: 1, Op: OpMaskedIn, Mask: 0xffffffff, Values: []uint64{unix.TIOCSTI, unix.TIOCLINUX}},
		{Arg: 3, Op: OpAnyBit, Mask: nsFlags},
		{Arg: 0, Op: OpNoBit, Mask: nsFlags},
		{Arg: 0, Op: OpMixed, Mask: 0xffffffff},
		{Arg: 5, Op: OpMixed, Mask: 0x8000000000000101},
	}
	for _, cond := range conds {
		if err := cond.check(); err != nil {
			t.Fatalf("%v: %v", cond, err)
		}
		alts, err := cond.alternatives()
		if err != nil {
			t.Fatalf("%v: %v", cond, err)
		}
		for _, v := range probeValues(cond, rng) {
			var args [6]uint64
			args[cond.Arg] = v
			any := false
			for _, a := range alts {
				any = any || a.holds(args)
			}
			if want := cond.matches(v); any != want {
				t.Errorf("%v on %#x: expansion says %v, meaning says %v", cond, v, any, want)
			}
		}
	}
}

func TestPolicyString(t *testing.T) {
	for _, name := range []string{Allowlist, Denylist} {
		p, _ := Builtin(name)
		s := p.String()
		for _, r := range p.Rules {
			if !strings.Contains(s, r.Why) {
				t.Errorf("%s: String() lacks %q", name, r.Why)
			}
		}
		if !strings.Contains(s, "x32): kill") {
			t.Errorf("%s: String() does not say other ABIs are killed", name)
		}
	}
	p, _ := Builtin(Denylist)
	if s := p.String(); !strings.Contains(s, "ioctl: notify-errno EPERM if arg1&0xffffffff in {0x5412,0x541c}") {
		t.Errorf("ioctl rule printed as:\n%s", s)
	}
	if s := (*Policy)(nil).String(); !strings.Contains(s, "none") {
		t.Errorf("nil policy prints %q", s)
	}
}
