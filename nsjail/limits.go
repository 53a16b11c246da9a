package nsjail

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/internal/kernel"
	"github.com/sbx-sandbox/sbx/internal/units"
)

// Limits are the resource limits of one run beyond the tmpfs caps and
// rlimits of the Spec. A zero field means no limit of that kind.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	// CPUTime is the total CPU time of every process of the sandbox.
	CPUTime time.Duration
	// OutputKill ends the run (status output_limit) when a stream passes
	// the output cap, instead of keeping its head and tail.
	OutputKill bool
	// RequireCgroup fails the run before it starts when no cgroup can
	// enforce the limits (rather than falling back to rlimits).
	RequireCgroup bool
}

// rlimitFor returns the rlimit of that resource in rls, or nil.
func rlimitFor(rls []Rlimit, resource string) *Rlimit {
	for i := range rls {
		if rls[i].Resource == resource {
			return &rls[i]
		}
	}
	return nil
}

// setRlimit replaces or adds an rlimit, never raising one that is
// already lower.
func setRlimit(rls *[]Rlimit, resource string, v uint64) {
	if r := rlimitFor(*rls, resource); r != nil {
		if v < r.Hard {
			r.Soft, r.Hard = v, v
		}
		return
	}
	*rls = append(*rls, Rlimit{Resource: resource, Soft: v, Hard: v})
}

// setCPURlimit sets RLIMIT_CPU to d rounded up to whole seconds, with the
// hard limit a second later: the kernel sends SIGXCPU at the soft limit
// and SIGKILL at the hard one, and with the two equal only the SIGKILL
// would come (kernel/time/posix-cpu-timers.c), which says less about why.
func setCPURlimit(rls *[]Rlimit, d time.Duration) {
	secs := uint64((d + time.Second - 1) / time.Second)
	if r := rlimitFor(*rls, "RLIMIT_CPU"); r != nil {
		r.Soft, r.Hard = secs, secs+1
		return
	}
	*rls = append(*rls, Rlimit{Resource: "RLIMIT_CPU", Soft: secs, Hard: secs + 1})
}

// setupLimits records what enforces each limit and starts creating the
// sandbox's cgroup (or, where there is none, puts rlimits in its place:
// they reach the init in the Confine message, after the Spec). On a pure
// cgroup v2 host the group must exist before the clone (the init is born
// in it); elsewhere creating it (a millisecond of mkdirs in five
// hierarchies) runs beside the init's start-up, and cgReady says when it
// is done.
func (s *supervisor) setupLimits() error {
	job := s.job
	l := job.Limits
	lim := map[string]LimitInfo{}
	s.res.Limits = lim
	spec := &job.Spec
	for _, r := range []struct{ key, res, unit, note string }{
		{"nofile", "RLIMIT_NOFILE", "count", ""},
		{"fsize", "RLIMIT_FSIZE", "bytes", ""},
		{"sigpending", "RLIMIT_SIGPENDING", "count", "signals queued for the sandbox's user, all its processes together"},
		{"msgqueue", "RLIMIT_MSGQUEUE", "bytes", "POSIX message queues of the sandbox's user, all its processes together"},
	} {
		if rl := rlimitFor(spec.Rlimits, r.res); rl != nil {
			lim[r.key] = LimitInfo{Value: float64(rl.Hard), Unit: r.unit, EnforcedBy: ByRlimit, Note: r.note}
		}
	}
	addUserNSQuotas(lim)
	for _, m := range spec.Mounts {
		switch {
		case m.Dst == spec.Workdir && m.Size > 0:
			lim["workspace_size"] = LimitInfo{Value: float64(m.Size), Unit: "bytes", EnforcedBy: ByTmpfs}
			lim["workspace_inodes"] = LimitInfo{Value: float64(m.Inodes), Unit: "count", EnforcedBy: ByTmpfs}
		case m.Dst == "/tmp" && m.Size > 0:
			lim["tmp_size"] = LimitInfo{Value: float64(m.Size), Unit: "bytes", EnforcedBy: ByTmpfs}
			lim["tmp_inodes"] = LimitInfo{Value: float64(m.Inodes), Unit: "count", EnforcedBy: ByTmpfs}
		}
	}
	if job.Timeout > 0 {
		lim["wall_time"] = LimitInfo{Value: float64(job.Timeout.Milliseconds()), Unit: "ms", EnforcedBy: BySupervisor}
	}
	if job.OutputLimit > 0 {
		note := "head and tail kept"
		if l.OutputKill {
			note = "the run is killed past it"
		}
		lim["output"] = LimitInfo{Value: float64(job.OutputLimit), Unit: "bytes", EnforcedBy: BySupervisor, Note: note}
	}
	if l.MemoryBytes == 0 && l.Pids == 0 && l.CPUs == 0 && l.CPUTime == 0 {
		close(s.cgReady)
		return nil
	}
	if cgroup.PureV2() {
		defer close(s.cgReady)
		s.cgBeforeClone = true
		return s.createCgroup()
	}
	go func() {
		defer close(s.cgReady)
		s.cgErr = s.createCgroup()
	}()
	return nil
}

// addUserNSQuotas lists the /proc/sys/user quotas the init sets. An
// optional one the host kernel lacks is not listed: there is nothing of
// that kind to drain.
func addUserNSQuotas(lim map[string]LimitInfo) {
	for _, q := range userNSQuotas {
		if q.result == "" {
			continue
		}
		if q.optional {
			if _, err := os.Stat("/proc/sys/user/" + q.name); err != nil {
				continue
			}
		}
		lim[q.result] = LimitInfo{Value: float64(q.value), Unit: "count", EnforcedBy: ByUserNS, Note: "user." + q.name + " of the sandbox's user namespace"}
	}
}

// createCgroup makes the sandbox's cgroup and fills the limits it
// enforces; what it cannot enforce falls back to rlimits.
func (s *supervisor) createCgroup() error {
	l := s.job.Limits
	lim := s.res.Limits
	g, err := cgroup.New(s.job.Spec.ID, cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs})
	if err != nil && l.RequireCgroup {
		return fmt.Errorf("the profile requires a cgroup: %w (see sbx doctor)", err)
	}
	if err != nil {
		s.warn(fmt.Sprintf("no cgroup for this run (%v): limits fall back to rlimits", err))
		s.rlimitFallback(map[string]error{cgroup.KindMemory: err, cgroup.KindPids: err, cgroup.KindCPUs: err}, err)
		return nil
	}
	s.cg = g
	by := ByCgroup1
	if g.Mode() == cgroup.ModeV2 {
		by = ByCgroup2
	}
	unenforced := g.Unenforced()
	if len(unenforced) > 0 && l.RequireCgroup {
		return fmt.Errorf("the profile requires a cgroup, but it cannot enforce %s (see sbx doctor)", unenforcedList(unenforced))
	}
	for kind, mode := range g.Enforced() {
		by := ByCgroup1
		if mode == cgroup.ModeV2 {
			by = ByCgroup2
		}
		switch kind {
		case cgroup.KindMemory:
			lim["memory"] = LimitInfo{Value: float64(l.MemoryBytes), Unit: "bytes", EnforcedBy: by, Note: "no swap"}
		case cgroup.KindPids:
			lim["pids"] = LimitInfo{Value: float64(l.Pids), Unit: "count", EnforcedBy: by, Note: "tasks, the init's threads included"}
		case cgroup.KindCPUs:
			lim["cpus"] = LimitInfo{Value: l.CPUs, Unit: "cpus", EnforcedBy: by}
		}
	}
	if l.CPUTime > 0 {
		// Watched from the group's CPU usage, with RLIMIT_CPU a second
		// later as a per-process backstop.
		lim["cpu_time"] = LimitInfo{Value: float64(l.CPUTime.Milliseconds()), Unit: "ms", EnforcedBy: by, Note: "total of every process"}
		setCPURlimit(&s.lateRlimits, l.CPUTime+time.Second+s.warmCPUAllowance())
	}
	if len(unenforced) > 0 {
		s.warn("cgroup cannot enforce " + unenforcedList(unenforced) + ": falling back to rlimits")
		s.rlimitFallback(unenforced, nil)
	}
	return nil
}

// unenforcedList names the limits a cgroup cannot enforce, each with why,
// in the order of their names: the same message on every run (a map's
// order is random).
func unenforcedList(unenforced map[string]error) string {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(unenforced)) {
		names = append(names, fmt.Sprintf("%s (%v)", k, unenforced[k]))
	}
	return strings.Join(names, ", ")
}

// rlimitFallback enforces with rlimits what no cgroup does. They are per
// process, and the Result says so: memory as RLIMIT_DATA (private
// writable memory: the heap and anonymous mappings, Linux 4.7), pids as
// RLIMIT_NPROC (counted per user namespace since Linux 5.14, so per
// sandbox; before that, per host user, which would count the caller's
// own processes: then not enforced). CPU time is the total of every
// process, which sbx polls from a task clock and /proc (cputotal_linux.go), with RLIMIT_CPU
// a second later as a per-process backstop. A CPU share has no rlimit:
// "none".
func (s *supervisor) rlimitFallback(kinds map[string]error, cgErr error) {
	l := s.job.Limits
	late := &s.lateRlimits
	lim := s.res.Limits
	if _, ok := kinds[cgroup.KindMemory]; ok && l.MemoryBytes > 0 {
		setRlimit(late, "RLIMIT_DATA", uint64(l.MemoryBytes))
		lim["memory"] = LimitInfo{Value: float64(l.MemoryBytes), Unit: "bytes", EnforcedBy: ByRlimit, Note: "RLIMIT_DATA, per process"}
	}
	if _, ok := kinds[cgroup.KindPids]; ok && l.Pids > 0 {
		if kernel.AtLeast(5, 14) {
			setRlimit(late, "RLIMIT_NPROC", uint64(l.Pids))
			lim["pids"] = LimitInfo{Value: float64(l.Pids), Unit: "count", EnforcedBy: ByRlimit, Note: "RLIMIT_NPROC, counting the tasks of the sandbox's user namespace only (Linux 5.14), the init's threads included"}
		} else {
			lim["pids"] = LimitInfo{Value: float64(l.Pids), Unit: "count", EnforcedBy: ByNone, Note: "RLIMIT_NPROC counts per host user before Linux 5.14"}
		}
	}
	if _, ok := kinds[cgroup.KindCPUs]; ok && l.CPUs > 0 {
		lim["cpus"] = LimitInfo{Value: l.CPUs, Unit: "cpus", EnforcedBy: ByNone, Note: "no rlimit can share out CPU"}
	}
	if cgErr != nil && l.CPUTime > 0 {
		setCPURlimit(late, l.CPUTime+time.Second+s.warmCPUAllowance())
		// The note is made final once the poll starts (watchCPUTotal).
		lim["cpu_time"] = LimitInfo{Value: float64(l.CPUTime.Milliseconds()), Unit: "ms", EnforcedBy: BySupervisor, Note: cpuTotalNote(false, nil)}
	}
}

// classifyLimits turns kernel evidence into the run's status: the OOM
// killer's count, refused forks, and the supervisor's own kills.
func (s *supervisor) classifyLimits(st *cgroup.Stats, exit *StatusMsg) {
	res := s.res
	ws := unix.WaitStatus(0)
	if exit != nil {
		ws = unix.WaitStatus(exit.WaitStatus)
	}
	switch {
	case st != nil && st.OOMKills > 0 && (exit == nil || ws.Signaled() && ws.Signal() == unix.SIGKILL):
		res.Status, res.ExitCode = StatusMemoryLimit, ExitKilled
		res.Message = fmt.Sprintf("memory limit of %s reached: the kernel's OOM killer ended the payload", units.HumanSize(s.job.Limits.MemoryBytes))
		s.setEvidence("memory", EvidenceOOMKill)
	case st != nil && st.PidsMaxEvents > 0:
		res.PidsLimitHit = true
		s.setEvidence("pids", EvidencePidsEvents)
		// The pids controller never kills: the run ended because of it
		// when forks failed and the payload then failed (or the init
		// could not make a thread and the sandbox died).
		if exit == nil || res.Status == StatusExit || res.Status == StatusSignal {
			res.Status, res.ExitCode = StatusPidsLimit, ExitKilled
			res.Message = fmt.Sprintf("pids limit of %d reached: %d forks were refused and the payload failed", s.job.Limits.Pids, st.PidsMaxEvents)
		}
	case s.classifyByEvidence(exit, ws):
	case exit == nil || !ws.Signaled():
		return
	case rlimitCPUKill(ws.Signal(), exit.cpuTime(), rlimitFor(s.lateRlimits, "RLIMIT_CPU")):
		res.Status, res.ExitCode, res.Signal = StatusCPULimit, ExitTimeLimit, nil
		res.Message = fmt.Sprintf("CPU time limit of %v reached (RLIMIT_CPU, per process)", s.job.Limits.CPUTime)
	case ws.Signal() == unix.SIGXCPU && s.job.Limits.CPUTime > 0:
		res.Message += fmt.Sprintf(" (not the CPU time limit of %v: the payload had used %v of CPU)", s.job.Limits.CPUTime, exit.cpuTime().Round(time.Millisecond))
	}
}

// rlimitCPUTolerance is how far below RLIMIT_CPU the payload's reaped CPU
// time may be for a kill to still count as the limit's. The kernel checks
// the limit against tick-sampled time, while rusage reports the
// scheduler's precise runtime (cputime_adjust): a few ticks apart.
const rlimitCPUTolerance = 100 * time.Millisecond

// rlimitCPUKill tells whether sig, with cpu the CPU time of the payload
// and its reaped children, is RLIMIT_CPU's doing: SIGXCPU once the soft
// limit passed, SIGKILL once the hard one did (setrlimit(2)). Anything
// else is a signal the payload could have sent itself (kill(2), a timer,
// F_SETSIG): not evidence of a limit.
func rlimitCPUKill(sig unix.Signal, cpu time.Duration, rl *Rlimit) bool {
	if rl == nil {
		return false
	}
	var secs uint64
	switch sig {
	case unix.SIGXCPU:
		secs = rl.Soft
	case unix.SIGKILL:
		secs = rl.Hard
	default:
		return false
	}
	return cpu >= time.Duration(secs)*time.Second-rlimitCPUTolerance
}
