package nsjail

import (
	"fmt"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/internal/units"
)

// finish fills the Result from the init's exit message, from why the
// supervisor ended the run if it did, and from the cgroup's evidence.
func (s *supervisor) finish(exit *StatusMsg, cmd *exec.Cmd, waitErr error) error {
	res := s.res
	var st *cgroup.Stats
	if s.cg != nil {
		if v, err := s.cg.Stats(); err == nil {
			st = &v
		}
	}
	switch {
	case exit != nil && exit.ExecErrno == 0:
		s.usageFromExit(exit)
		s.denials(exit)
	case exit != nil:
	case !s.killed() && (st == nil || st.PidsMaxEvents == 0) && !s.pidsSampledAtLimit(nil):
		return fmt.Errorf("sbx init ended without a status (%v)", describeWait(cmd, waitErr))
	default:
		s.usageFromInit(cmd)
	}
	s.classify(exit, st)
	s.takePyError(exit)
	s.takeFigures(exit)
	s.fillLayers(exit)
	if st != nil {
		// The group saw every process, the init's few ms included.
		u := &res.Usage
		// A warm sandbox's preload is not the payload's (s.base).
		user, sys := max(0, st.UserCPU-s.base.user), max(0, st.SystemCPU-s.base.sys)
		u.UserMS, u.SystemMS = user.Milliseconds(), sys.Milliseconds()
		u.CPUMS = (user + sys).Milliseconds()
		if st.PeakMemoryBytes > 0 {
			u.PeakMemoryBytes = st.PeakMemoryBytes
		}
		res.PidsLimitHit = res.PidsLimitHit || st.PidsMaxEvents > 0
	}
	s.fillPidsPeak(st, exit)
	return nil
}

// classify decides the run's status, exit code, signal and message from
// evidence the payload cannot fabricate (issue 11, finding 8): the
// supervisor's own kills (killedFor), the cgroup's counters (st), a kill
// the init made for the seccomp filter, and the CPU time the kernel
// accounted to the payload. A signal is only a signal: SIGXCPU or SIGSYS
// that a payload sent itself stays status signal.
func (s *supervisor) classify(exit *StatusMsg, st *cgroup.Stats) {
	res := s.res
	switch {
	case exit != nil && exit.ExecErrno != 0:
		res.Status, res.ExitCode = StatusCannotExec, ExitCannotExec
		res.Message = "cannot run the payload: " + exit.Msg
		if syscall.Errno(exit.ExecErrno) == unix.ENOENT {
			res.Status, res.ExitCode = StatusNotFound, ExitNotFound
			res.Message = "the payload's program is not in the sandbox's root: " + exit.Msg
		}
	case exit != nil:
		ws := unix.WaitStatus(exit.WaitStatus)
		classifyWait(res, ws)
		if exit.FilterKilled && ws.Signaled() && ws.Signal() == unix.SIGKILL {
			res.Status = StatusSeccomp
			res.Message = "killed for the seccomp filter: a system call through another ABI (32-bit int 0x80 or x32), which the filter never allows"
		}
	}
	switch s.killedFor {
	case StatusTimeout:
		res.Status, res.ExitCode, res.Signal = StatusTimeout, ExitTimeLimit, nil
		res.Message = fmt.Sprintf("wall-clock limit of %v reached; the sandbox was killed", s.job.Timeout)
	case StatusCPULimit:
		res.Status, res.ExitCode, res.Signal = StatusCPULimit, ExitTimeLimit, nil
		res.Message = fmt.Sprintf("CPU time limit of %v reached: %v measured over all processes together; the sandbox was killed", s.job.Limits.CPUTime, s.cpuAtKill.Round(time.Millisecond))
		if li, ok := res.Limits["cpu_time"]; ok {
			li.AtKill = float64(s.cpuAtKill.Milliseconds())
			res.Limits["cpu_time"] = li
		}
	case StatusOutputLimit:
		res.Status, res.ExitCode, res.Signal = StatusOutputLimit, ExitKilled, nil
		res.Message = fmt.Sprintf("output limit of %s per stream passed; the sandbox was killed", units.HumanSize(s.job.OutputLimit))
	default:
		s.classifyLimits(st, exit)
	}
}

func (s *supervisor) usageFromExit(exit *StatusMsg) {
	u := &s.res.Usage
	u.UserMS = exit.UserUS / 1000
	u.SystemMS = exit.SystemUS / 1000
	u.CPUMS = (exit.UserUS + exit.SystemUS) / 1000
	u.PeakMemoryBytes = exit.MaxRSSKB * 1024
}

// usageFromInit reads the usage of a killed sandbox from the init's own
// rusage, which includes every child reaped when its pid namespace died.
func (s *supervisor) usageFromInit(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		return
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u := &s.res.Usage
		u.UserMS = ru.Utime.Sec*1000 + ru.Utime.Usec/1000
		u.SystemMS = ru.Stime.Sec*1000 + ru.Stime.Usec/1000
		u.CPUMS = u.UserMS + u.SystemMS
		u.PeakMemoryBytes = ru.Maxrss * 1024
	}
}

func describeWait(cmd *exec.Cmd, err error) string {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.String()
	}
	return fmt.Sprint(err)
}

// denials fills seccomp_denials.
func (s *supervisor) denials(exit *StatusMsg) {
	res := s.res
	if !exit.Filtered {
		return
	}
	if exit.DenialsKnown {
		res.SeccompDenials = []Denial{}
		for nr, n := range exit.Denials {
			res.SeccompDenials = append(res.SeccompDenials, Denial{Syscall: syscallName(nr), Count: n})
		}
		sort.Slice(res.SeccompDenials, func(i, j int) bool {
			a, b := res.SeccompDenials[i], res.SeccompDenials[j]
			return a.Count > b.Count || a.Count == b.Count && a.Syscall < b.Syscall
		})
		if exit.DenialsOther > 0 {
			// Last, whatever its count: it is not one syscall.
			res.SeccompDenials = append(res.SeccompDenials, Denial{Syscall: DenialOther, Count: exit.DenialsOther})
			s.warnings = append(s.warnings, fmt.Sprintf("seccomp_denials summarised: the first %d distinct syscalls are listed by name, and %d calls of other syscalls are counted together as %q", len(exit.Denials), exit.DenialsOther, DenialOther))
		}
	} else {
		s.warnings = append(s.warnings, "the kernel gave no seccomp listener: denied syscalls were refused but not counted")
	}
}

// takePyError puts the runner's report into the Result when the payload
// died of it: exit status 1, or SIGINT for a KeyboardInterrupt (CPython
// 3.8+). A payload can write the report itself, but it can as well raise
// what it likes: the report says no more than its own exit does.
func (s *supervisor) takePyError(exit *StatusMsg) {
	if exit == nil || exit.PyError == nil {
		return
	}
	res := s.res
	sigint := res.Signal != nil && *res.Signal == "SIGINT"
	if (res.ExitCode == 1 && res.Signal == nil) || sigint {
		res.Error = exit.PyError
	}
}
