package nsjail

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/internal/units"
)

// One contract on every host (issue 19, point 1): where a limit is an
// rlimit, the kernel keeps no count of what it refused, so the status is
// decided from what is known, and the Result names that evidence
// (limits.X.evidence). The table of what each mode can tell is in
// DESIGN.md, "What each mode can tell".

// byRlimit reports whether the Result's limit key is enforced by an
// rlimit (setupLimits, rlimitFallback).
func (s *supervisor) byRlimit(key string) bool {
	li, ok := s.res.Limits[key]
	return ok && li.EnforcedBy == ByRlimit
}

// pidsByRlimit: the pids limit is RLIMIT_NPROC, whose evidence the CPU
// poll samples even without a CPU time limit.
func (s *supervisor) pidsByRlimit() bool { return s.byRlimit("pids") }

// cpuLimitOrNone is the CPU time limit the poll ends the run at: d, or,
// without one, a total no run reaches (the poll then only samples).
func cpuLimitOrNone(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return math.MaxInt64
}

// sampleTasks keeps the most tasks one poll counted; safe from the poll's
// goroutine.
func (s *supervisor) sampleTasks(n int) {
	for {
		old := s.tasksPolled.Load()
		if int64(n) <= old || s.tasksPolled.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// sampledTasks is the most tasks the sandbox was seen to hold: by the
// poll, or by the init when the payload ended (StatusMsg.Tasks); 0 when
// never counted.
func (s *supervisor) sampledTasks(exit *StatusMsg) int64 {
	n := s.tasksPolled.Load()
	if exit != nil {
		n = max(n, int64(exit.Tasks))
	}
	return n
}

// pidsSampledAtLimit: the pids limit is RLIMIT_NPROC and the sandbox
// was counted at it. Without the init's report (exit nil) this is the
// poll's count alone: an init that could not make a thread at the limit
// (it lowers its own rlimits when the kernel gives no seccomp listener)
// dies without a status, and the count says why.
func (s *supervisor) pidsSampledAtLimit(exit *StatusMsg) bool {
	return s.byRlimit("pids") && s.job.Limits.Pids > 0 && s.sampledTasks(exit) >= s.job.Limits.Pids
}

// setEvidence records on the Result's limit key what showed it reached.
func (s *supervisor) setEvidence(key string, e Evidence) {
	if li, ok := s.res.Limits[key]; ok {
		li.Evidence = e
		s.res.Limits[key] = li
	}
}

// fillPidsPeak sets usage.pids_peak: the cgroup's pids.peak when it has
// one (0 there means the file is missing: a group holding the init never
// peaks at 0), else the sampled count, else null.
func (s *supervisor) fillPidsPeak(st *cgroup.Stats, exit *StatusMsg) {
	u := &s.res.Usage
	u.PidsPeak, u.PidsPeakSource = nil, ""
	switch n := s.sampledTasks(exit); {
	case st != nil && st.PidsPeak > 0:
		v := st.PidsPeak
		u.PidsPeak, u.PidsPeakSource = &v, PidsPeakCgroup
	case n > 0:
		u.PidsPeak, u.PidsPeakSource = &n, PidsPeakSampled
	}
}

// pythonMemoryError reports whether the last line of the payload's
// stderr is Python's report of an uncaught MemoryError
// (endsWithMemoryError). The capture keeps the stream's tail, so a long
// traceback still ends there.
func (s *supervisor) pythonMemoryError() bool {
	if s.stderr == nil {
		return false
	}
	return endsWithMemoryError(s.stderr.Bytes())
}

// endsWithMemoryError: the last line of b names an exception whose class
// is MemoryError or a subclass named so (numpy's
// numpy.core._exceptions._ArrayMemoryError: "Unable to allocate 16.0 GiB
// ..."), alone or with a message. A traceback prints a class outside
// builtins with its module path.
func endsWithMemoryError(b []byte) bool {
	b = bytes.TrimRight(b, " \t\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	name, _, _ := bytes.Cut(b, []byte(": "))
	for _, c := range name {
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	if i := bytes.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return bytes.HasSuffix(name, []byte("MemoryError"))
}

// hostMemory is what the host's overcommit policy refuses an allocation
// against: RAM plus swap, and vm.overcommit_memory. A variable for the
// tests.
var hostMemory = func() (ramSwap int64, overcommit int, err error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, 0, fmt.Errorf("sysinfo: %w", err)
	}
	b, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		return 0, 0, err
	}
	oc, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/sys/vm/overcommit_memory %q: %w", b, err)
	}
	return (int64(si.Totalram) + int64(si.Totalswap)) * int64(si.Unit), oc, nil
}

// memoryErrorAtLimit tells whether the payload's end is a refused
// allocation past its memory limit, and says how. CPython exits 1 on an
// uncaught exception, and raises MemoryError when malloc fails.
//
//   - Under RLIMIT_DATA the kernel refuses the mmap or brk that passes the
//     limit (ENOMEM, setrlimit(2)) and counts nothing: the MemoryError is
//     the trace.
//   - Under a cgroup the limit refuses nothing (its OOM killer kills), but
//     the host's overcommit heuristic (vm.overcommit_memory 0) refuses at
//     once a request larger than RAM plus swap (mm/util.c
//     __vm_enough_memory, OVERCOMMIT_GUESS). With the limit below that, the
//     request was past the limit too: what RLIMIT_DATA calls memory_limit,
//     the cgroup run is called the same (bytearray(64*1024**3)).
//
// The payload can print a MemoryError unprovoked; a forged memory_limit
// only misreports its own run (DESIGN.md, "What each mode can tell").
func (s *supervisor) memoryErrorAtLimit(exit *StatusMsg, ws unix.WaitStatus) (string, bool) {
	li, ok := s.res.Limits["memory"]
	limit := s.job.Limits.MemoryBytes
	if !ok || limit <= 0 || exit == nil || !ws.Exited() || ws.ExitStatus() != 1 || !s.pythonMemoryError() {
		return "", false
	}
	switch li.EnforcedBy {
	case ByRlimit:
		return fmt.Sprintf("memory limit of %s reached (RLIMIT_DATA, per process): an allocation was refused, and the payload ended with Python's MemoryError (exit status 1)", units.HumanSize(limit)), true
	case ByCgroup1, ByCgroup2:
		total, overcommit, err := hostMemory()
		if err != nil || overcommit != 0 || total <= limit {
			return "", false
		}
		return fmt.Sprintf("memory limit of %s passed: the payload asked at once for more than the host's memory and swap (%.1f GiB), which the kernel refuses, and ended with Python's MemoryError (exit status 1)", units.HumanSize(limit), float64(total)/(1<<30)), true
	}
	return "", false
}

// classifyByEvidence decides a memory_limit or pids_limit status that no
// cgroup count shows, after no kill of sbx's and no OOM kill or refused
// fork counted by a cgroup decided the run; it reports whether it did.
// ws is the payload's wait status.
func (s *supervisor) classifyByEvidence(exit *StatusMsg, ws unix.WaitStatus) bool {
	res := s.res
	l := s.job.Limits
	if msg, ok := s.memoryErrorAtLimit(exit, ws); ok {
		res.Status, res.ExitCode, res.Signal = StatusMemoryLimit, ExitKilled, nil
		res.Message = msg
		s.setEvidence("memory", EvidenceMemoryError)
		return true
	}
	if s.pidsSampledAtLimit(exit) {
		n := s.sampledTasks(exit)
		res.PidsLimitHit = true
		s.setEvidence("pids", EvidenceTasksSampled)
		// As under a cgroup: RLIMIT_NPROC never kills, the run ended
		// because of it when forks failed and the payload then failed.
		if exit == nil || res.Status == StatusExit || res.Status == StatusSignal {
			res.Status, res.ExitCode = StatusPidsLimit, ExitKilled
			res.Message = fmt.Sprintf("pids limit of %d reached (RLIMIT_NPROC): %d tasks were counted in the sandbox, where every further fork fails with EAGAIN, and the payload failed", l.Pids, n)
		}
		return true
	}
	return false
}
