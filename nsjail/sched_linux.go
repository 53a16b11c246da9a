package nsjail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A sandbox never runs with a real-time or deadline policy, or a negative
// nice value, that sbx's caller had: a payload spinning under SCHED_FIFO
// takes its CPU from everything of the host below its priority, and
// neither cgroup's CPU limit bounds it (cpu.max and v1's CFS quota cover
// SCHED_OTHER only; sched(7), "Limiting the CPU usage of real-time and
// deadline processes"). Inheriting one is also what made a v1 start fail:
// a real-time task cannot join a cpu cgroup whose cpu.rt_runtime_us is 0,
// which every new group's is (CONFIG_RT_GROUP_SCHED: the attach's write
// fails with EINVAL), and a SCHED_DEADLINE task cannot fork at all
// (EAGAIN).
//
// resetSchedOnFork sets SCHED_FLAG_RESET_ON_FORK on the calling thread,
// the one that clones the init, when its policy is real-time or deadline
// or its nice value negative: the kernel then gives the init SCHED_OTHER
// and nice 0 (sched(7), "The SCHED_RESET_ON_FORK flag"; sched_fork() in
// kernel/sched/core.c, for any clone, CLONE_VM or CLONE_INTO_CGROUP
// included), and the payload inherits that. The thread itself keeps its
// policy, and so does the rest of sbx. Setting the flag needs no
// privilege; only clearing it does, so a thread that returns to Go's pool
// keeps it, which only ever resets what sbx's own children inherit. The
// payload cannot take a real-time policy back either: its RLIMIT_RTPRIO
// and RLIMIT_NICE are 0 (profiles' Spec). A caller with SCHED_OTHER and
// nice >= 0, nearly every one, costs one sched_getattr(2).
func resetSchedOnFork() error {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return fmt.Errorf("sched_getattr(0): %w", err)
	}
	if !inheritsPriority(attr) || attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0 {
		return nil
	}
	// The thread's own attributes back, plus the flag. For SCHED_DEADLINE
	// the kernel requires its runtime, deadline and period, which
	// sched_getattr returned; util clamps are left alone (no
	// SCHED_FLAG_UTIL_CLAMP_*: kernel/sched/syscalls.c).
	set := *attr
	set.Size = unix.SizeofSchedAttr
	set.Flags = attr.Flags&^(unix.SCHED_FLAG_UTIL_CLAMP_MIN|unix.SCHED_FLAG_UTIL_CLAMP_MAX) | unix.SCHED_FLAG_RESET_ON_FORK
	if err := unix.SchedSetAttr(0, &set, 0); err != nil {
		return fmt.Errorf("sched_setattr(0, policy=%d priority=%d nice=%d, SCHED_FLAG_RESET_ON_FORK): %w", attr.Policy, attr.Priority, attr.Nice, err)
	}
	return nil
}

// inheritsPriority says whether a thread's children would inherit a
// scheduling priority above a plain process's: a real-time or deadline
// policy, or a negative nice value.
func inheritsPriority(attr *unix.SchedAttr) bool {
	switch attr.Policy {
	case unix.SCHED_FIFO, unix.SCHED_RR, unix.SCHED_DEADLINE:
		return true
	}
	return attr.Nice < 0
}
