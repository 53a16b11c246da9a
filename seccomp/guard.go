package seccomp

import (
	"slices"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// Guard names the filter a run loads under policy "none": the init guard
// alone. "none" turns off the syscall policy, not the init's protection
// from its payload (fail closed).
const Guard = policyname.Guard

// ioprio_set's "which" (include/uapi/linux/ioprio.h; x/sys/unix has none).
const (
	ioprioWhoProcess = 1
	ioprioWhoPgrp    = 2
	ioprioWhoUser    = 3
)

// lowHalf is the mask for an int or unsigned int argument: the kernel's
// syscall wrappers truncate the register to 32 bits, so a rule must ignore
// the upper half or 1<<32|1 would reach pid 1 past it (as with ioctl's
// request, CVE-2019-10063).
const lowHalf = 0xffffffff

// isInit matches a pid_t argument that names the sandbox's init: pid 1 of
// the sandbox's pid namespace, which the payload can never leave.
func isInit(arg int) ArgCond {
	return ArgCond{Arg: arg, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{1}}
}

// initGuard keeps the payload away from its init (pid 1, same uid in the
// same user namespace): whatever passes the kernel's same-uid checks and
// would let the payload change the init's limits, scheduling or signals.
// It also holds the payload's first process before its execve, for the
// init to set the payload's rlimits on it (nsjail/init_rlimits_linux.go).
// Every built-in policy carries these rules, and the "none" policy loads
// them alone.
//
// What is not here, and why it holds anyway: the init is not dumpable
// (setNotDumpable), so ptrace, process_vm_readv/writev, kcmp, pidfd_getfd,
// get_robust_list, migrate_pages, move_pages, perf_event_open on it and
// /proc/1/{mem,environ,fd,...} fail the kernel's ptrace access check, and
// /proc/1/* is owned by an unmapped root, so oom_score_adj, coredump_filter
// and the like cannot be opened for writing. The init's other threads
// have tids of their own that a pid==1 rule cannot see; prlimit64, the one
// call the init would not survive, is therefore refused for every pid but
// 0 (reading stays allowed). A signal that still reaches an init thread (by tid, or through a
// /proc/1 fd given to pidfd_send_signal) meets a disposition that ignores
// it (initIgnoredSignals; the kernel drops SIG_DFL ones for a pid
// namespace's init), and a scheduling change on one only slows it, within
// the supervisor's timers.
func initGuard() []Rule {
	deny := func(why string, args []ArgCond, names ...string) Rule {
		return Rule{Names: names, Action: ActNotifyErrno, Args: args, Why: why}
	}
	return []Rule{
		{
			Names:  []string{"setsid"},
			Action: ActHold,
			Why:    "the payload's first process calls it between fork and execve (syscall.ForkExec, Setsid): held there, the init sets the payload's rlimits on it, so that they never bind the init itself; any later setsid just continues",
		},
		deny("sets another process's limits: the init's threads (each with a tid of its own) pass prlimit's same-uid check, and a lowered RLIMIT_CPU, AS, NPROC or NOFILE kills the init or empties its report; only pid 0 (the caller) may set, reading stays allowed (prlimit(2))",
			[]ArgCond{{Arg: 0, Op: OpAnyBit, Mask: lowHalf}, {Arg: 2, Op: OpNotIn, Values: []uint64{0}}}, "prlimit64"),
		deny("RLIMIT_CORE stays at 1: under a lower soft limit the kernel hands a crash to a piped core_pattern helper on the host (core(5): only a limit of 1 stops it)",
			[]ArgCond{{Arg: 1, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{unix.RLIMIT_CORE}}, {Arg: 2, Op: OpNotIn, Values: []uint64{0}}}, "prlimit64"),
		deny("RLIMIT_CORE stays at 1 (see prlimit64)",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{unix.RLIMIT_CORE}}}, "setrlimit"),
		deny("switches off the perf counters attached to the caller, among them the supervisor's task clock, which counts the CPU of children nobody waits for when no cgroup does (nsjail/cputotal_linux.go; prctl(2))",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{unix.PR_TASK_PERF_EVENTS_DISABLE}}}, "prctl"),
		deny("signals the init (pid 1) or takes a pidfd of it: the payload's status is the init's to report",
			[]ArgCond{isInit(0)}, "kill", "rt_sigqueueinfo", "pidfd_open"),
		{
			Names:  []string{"tkill", "tgkill", "rt_tgsigqueueinfo"},
			Action: ActErrno,
			Errno:  int(unix.ESRCH),
			Args:   []ArgCond{isInit(0)},
			Why:    "signals a thread of the init (pid 1); silent ESRCH, not a reported EPERM, because the init's own runtime sends tgkill(1, tid) to its threads (preemption) from the filtered thread",
		},
		deny("moves the init (pid 1) to other CPUs, another scheduling class or priority",
			[]ArgCond{isInit(0)}, "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"),
		deny("lowers the priority of the init (pid 1, and process group 1, which is the init's own)",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{unix.PRIO_PROCESS, unix.PRIO_PGRP}}, isInit(1)}, "setpriority"),
		deny("PRIO_USER reaches every process of the sandbox's uid, the init's threads included",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{unix.PRIO_USER}}}, "setpriority"),
		deny("sets the I/O priority of the init (pid 1, process group 1)",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{ioprioWhoProcess, ioprioWhoPgrp}}, isInit(1)}, "ioprio_set"),
		deny("IOPRIO_WHO_USER reaches every process of the sandbox's uid, the init's threads included",
			[]ArgCond{{Arg: 0, Op: OpMaskedIn, Mask: lowHalf, Values: []uint64{ioprioWhoUser}}}, "ioprio_set"),
	}
}

// withGuard appends the init guard to p for the syscalls p could let
// through: a name p denies whatever its arguments needs no guard (and
// libseccomp would drop the conditional rule; see Validate). Where a rule
// would repeat p's default (the allowlist's notify-errno EPERM), which
// libseccomp refuses, p's own allow rules must leave the guarded calls
// out instead; TestBuiltinProperties holds every policy to the guard
// either way.
func withGuard(p *Policy) *Policy {
	for _, g := range initGuard() {
		if g.Action == ActHold {
			// Wherever p allows the call or not: a hold is the init's.
			p.Rules = append(p.Rules, g)
			continue
		}
		if sameAction(g.outcome(), p.defaultOutcome(), true) || sameAction(g.outcome(), p.defaultOutcome(), false) {
			continue
		}
		var names []string
		for _, n := range g.Names {
			if p.mayAllow(n) {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			g.Names = names
			p.Rules = append(p.Rules, g)
		}
	}
	return p
}

// mayAllow reports whether some invocation of name could be allowed: an
// allow rule names it, or the default allows and no rule denies it
// unconditionally.
func (p *Policy) mayAllow(name string) bool {
	for _, r := range p.Rules {
		if !slices.Contains(r.Names, name) {
			continue
		}
		if r.Action == ActAllow {
			return true
		}
		if len(r.Args) == 0 {
			return false
		}
	}
	return p.Default == ActAllow
}

// guardPolicy is the filter of a run whose policy is "none".
func guardPolicy() *Policy {
	return withGuard(&Policy{Name: Guard, Default: ActAllow})
}

// ForRun returns the policy a run under the named policy loads: the
// built-in one, or for "none" the init guard alone. Never nil.
func ForRun(name string) (*Policy, error) {
	if name == None {
		return guardPolicy(), nil
	}
	p, err := Builtin(name)
	if err != nil {
		return nil, err
	}
	return p, nil
}
