package nsjail

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// warmCPUBudget is what a warm sandbox's RLIMIT_CPU backstop adds for
// the preload: the backstop is per process, and the interpreter's clock
// started before its payload (the supervisor's own total, which is the
// limit, counts from the handoff).
const warmCPUBudget = 30 * time.Second

func (s *supervisor) warmCPUAllowance() time.Duration {
	if s.job.Spec.Warm == nil {
		return 0
	}
	return warmCPUBudget
}

// cpuBase is the CPU the sandbox had used when its payload was handed
// over (kindStarted): a warm sandbox's preload, left out of the payload's
// usage and CPU limit, so that both count from the handoff as a cold
// run's count from its start. Zero for a cold sandbox.
type cpuBase struct {
	user, sys time.Duration // the cgroup's
	clock     time.Duration // the task clock's (no cgroup)
}

// takeCPUBase reads the baseline at the handoff.
func (s *supervisor) takeCPUBase() {
	if s.job.Spec.Warm == nil {
		return
	}
	if s.cg != nil {
		if st, err := s.cg.Stats(); err == nil {
			s.base.user, s.base.sys = st.UserCPU, st.SystemCPU
		}
	}
	<-s.attached // openCPUClock has run
	if s.cpuClock >= 0 {
		var b [8]byte
		if n, err := unix.Read(s.cpuClock, b[:]); err == nil && n == 8 {
			s.base.clock = time.Duration(*(*uint64)(unsafe.Pointer(&b[0])))
		}
	}
}

// applyLower lowers the run's supervisor-side limits for this payload
// (Payload.Lower), before its timers start, and reports the effective
// values in the Result. The rlimits travel to the init with the payload.
func (s *supervisor) applyLower(pl *Payload) error {
	if pl.Lower == nil {
		return nil
	}
	// The caller's Lower stays as it was: what the init gets may grow.
	l := *pl.Lower
	l.Rlimits = append([]Rlimit(nil), l.Rlimits...)
	pl.Lower = &l
	job, lim := s.job, s.res.Limits
	if err := s.lowerMemoryPids(&l); err != nil {
		return err
	}
	if l.Timeout > 0 && (job.Timeout == 0 || l.Timeout < job.Timeout) {
		job.Timeout = l.Timeout
		li := lim["wall_time"]
		li.Value, li.Unit, li.EnforcedBy = float64(l.Timeout.Milliseconds()), "ms", BySupervisor
		lim["wall_time"] = li
	}
	if l.CPUTime > 0 && (job.Limits.CPUTime == 0 || l.CPUTime < job.Limits.CPUTime) {
		if li, ok := lim["cpu_time"]; ok {
			// Only a limit the sandbox enforces can be lowered: one
			// that nothing enforced stays unenforced, and says so.
			job.Limits.CPUTime = l.CPUTime
			li.Value = float64(l.CPUTime.Milliseconds())
			lim["cpu_time"] = li
		}
	}
	for _, r := range l.Rlimits {
		for key, res := range rlimitKeys {
			if res != r.Resource {
				continue
			}
			if li, ok := lim[key]; ok && float64(r.Hard) < li.Value {
				li.Value = float64(r.Hard)
				lim[key] = li
			} else if !ok {
				lim[key] = LimitInfo{Value: float64(r.Hard), Unit: rlimitUnits[key], EnforcedBy: ByRlimit}
			}
		}
	}
	return nil
}

// lowerMemoryPids lowers memory and pids where the sandbox enforces them:
// the supervisor writes its cgroup's values (the cgroup was made, cgReady,
// before the sandbox said ready); where rlimits stand in for the cgroup
// (rlimitFallback: RLIMIT_DATA, RLIMIT_NPROC) they join the rlimits the
// init sets on the payload. A limit nothing enforced stays so. The
// Result's limits are the effective values.
func (s *supervisor) lowerMemoryPids(l *Lower) error {
	lim := s.res.Limits
	var mem, pids int64
	for _, k := range []struct {
		key, rlimit string
		want        int64
		cg          *int64
	}{{"memory", "RLIMIT_DATA", l.MemoryBytes, &mem}, {"pids", "RLIMIT_NPROC", l.Pids, &pids}} {
		li, ok := lim[k.key]
		if !ok || k.want <= 0 || float64(k.want) >= li.Value {
			continue
		}
		switch li.EnforcedBy {
		case ByCgroup1, ByCgroup2:
			if s.cg != nil {
				*k.cg = k.want
			}
		case ByRlimit:
			l.Rlimits = append(l.Rlimits, Rlimit{Resource: k.rlimit, Soft: uint64(k.want), Hard: uint64(k.want)})
			li.Value = float64(k.want)
			lim[k.key] = li
			if k.key == "memory" {
				s.job.Limits.MemoryBytes = k.want
			} else {
				s.job.Limits.Pids = k.want
			}
		}
	}
	if mem == 0 && pids == 0 {
		return nil
	}
	if err := s.cg.Lower(mem, pids); err != nil {
		return fmt.Errorf("lower the sandbox's limits (memory %d, pids %d): %w", mem, pids, err)
	}
	if mem > 0 {
		li := lim["memory"]
		li.Value = float64(mem)
		lim["memory"] = li
		s.job.Limits.MemoryBytes = mem
	}
	if pids > 0 {
		li := lim["pids"]
		li.Value = float64(pids)
		lim["pids"] = li
		s.job.Limits.Pids = pids
	}
	return nil
}

// rlimitKeys are the Result's limits that are rlimits, and their units.
var (
	rlimitKeys  = map[string]string{"nofile": "RLIMIT_NOFILE", "fsize": "RLIMIT_FSIZE", "sigpending": "RLIMIT_SIGPENDING", "msgqueue": "RLIMIT_MSGQUEUE"}
	rlimitUnits = map[string]string{"nofile": "count", "fsize": "bytes", "sigpending": "count", "msgqueue": "bytes"}
)
