package nsjail

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
)

// TestClassify: a status names a limit or the filter only on evidence the
// payload cannot fabricate (issue 11, finding 8).
func TestClassify(t *testing.T) {
	sig := func(s unix.Signal) uint32 { return uint32(s) }
	cpu := func(d time.Duration) int64 { return d.Microseconds() }
	// RLIMIT_CPU as setCPURlimit makes it for a 5 s limit (no cgroup),
	// and for the cgroup's backstop a second later.
	rl5 := []Rlimit{{Resource: "RLIMIT_CPU", Soft: 5, Hard: 6}}
	rl6 := []Rlimit{{Resource: "RLIMIT_CPU", Soft: 6, Hard: 7}}
	cases := []struct {
		name      string
		killedFor Status
		limits    Limits
		rlimits   []Rlimit
		exit      *StatusMsg
		st        *cgroup.Stats
		status    Status
		code      int    // sbx's exit code
		signal    string // "" for null
	}{
		{"exit 0", "", Limits{}, nil, &StatusMsg{Kind: kindExit}, nil, StatusOK, 0, ""},
		{"exit 3", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: 3 << 8}, nil, StatusExit, 3, ""},
		{"not found", "", Limits{}, nil, &StatusMsg{Kind: kindExit, ExecErrno: int(unix.ENOENT)}, nil, StatusNotFound, ExitNotFound, ""},
		{"cannot exec", "", Limits{}, nil, &StatusMsg{Kind: kindExit, ExecErrno: int(unix.EACCES)}, nil, StatusCannotExec, ExitCannotExec, ""},
		{"SIGSEGV", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGSEGV)}, nil, StatusSignal, 139, "SIGSEGV"},

		{"forged SIGXCPU, rlimit", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(40 * time.Millisecond)}, nil, StatusSignal, 128 + 24, "SIGXCPU"},
		{"forged SIGXCPU, cgroup", "", Limits{CPUTime: 5 * time.Second}, rl6,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(40 * time.Millisecond)}, &cgroup.Stats{UserCPU: 50 * time.Millisecond}, StatusSignal, 128 + 24, "SIGXCPU"},
		{"SIGXCPU without a CPU limit", "", Limits{}, nil,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(time.Hour)}, nil, StatusSignal, 128 + 24, "SIGXCPU"},
		{"forged SIGXCPU just under the tolerance", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(5*time.Second - rlimitCPUTolerance - time.Millisecond)}, nil, StatusSignal, 128 + 24, "SIGXCPU"},
		{"real RLIMIT_CPU SIGXCPU", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(4980 * time.Millisecond), SystemUS: cpu(30 * time.Millisecond)}, nil, StatusCPULimit, ExitTimeLimit, ""},
		{"real RLIMIT_CPU SIGXCPU within the tolerance", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGXCPU), UserUS: cpu(4950 * time.Millisecond)}, nil, StatusCPULimit, ExitTimeLimit, ""},
		{"real RLIMIT_CPU SIGKILL at the hard limit", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL), UserUS: cpu(6 * time.Second)}, nil, StatusCPULimit, ExitTimeLimit, ""},
		{"SIGKILL between the soft and hard limits", "", Limits{CPUTime: 5 * time.Second}, rl5,
			&StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL), UserUS: cpu(5500 * time.Millisecond)}, nil, StatusSignal, 137, "SIGKILL"},

		{"forged SIGSYS", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGSYS), Filtered: true, DenialsKnown: true}, nil, StatusSignal, 128 + 31, "SIGSYS"},
		{"forged SIGSYS with a core", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGSYS) | 0x80, Filtered: true}, nil, StatusSignal, 128 + 31, "SIGSYS"},
		{"real seccomp kill", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL), Filtered: true, DenialsKnown: true, FilterKilled: true}, nil, StatusSeccomp, ExitKilled, "SIGKILL"},
		{"filter kill claimed, payload exited", "", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8, Filtered: true, FilterKilled: true}, nil, StatusExit, 1, ""},

		{"SIGKILL with an OOM kill", "", Limits{MemoryBytes: 1 << 28}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, &cgroup.Stats{OOMKills: 1}, StatusMemoryLimit, ExitKilled, "SIGKILL"},
		{"SIGKILL without an OOM kill", "", Limits{MemoryBytes: 1 << 28}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, &cgroup.Stats{}, StatusSignal, 137, "SIGKILL"},
		{"OOM kill of a child, payload exited 1", "", Limits{MemoryBytes: 1 << 28}, nil, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8}, &cgroup.Stats{OOMKills: 1}, StatusExit, 1, ""},
		{"forks refused, payload failed", "", Limits{Pids: 8}, nil, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8}, &cgroup.Stats{PidsMaxEvents: 3}, StatusPidsLimit, ExitKilled, ""},

		{"wall limit", "timeout", Limits{}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, nil, StatusTimeout, ExitTimeLimit, ""},
		{"wall limit, no report", "timeout", Limits{}, nil, nil, nil, StatusTimeout, ExitTimeLimit, ""},
		{"cgroup CPU watchdog", "cpu_limit", Limits{CPUTime: time.Second}, rl6, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, &cgroup.Stats{UserCPU: time.Second}, StatusCPULimit, ExitTimeLimit, ""},
		{"output limit", "output_limit", Limits{OutputKill: true}, nil, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, nil, StatusOutputLimit, ExitKilled, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &supervisor{job: &Job{Limits: tc.limits, Timeout: time.Second}, res: &Result{}, killedFor: tc.killedFor, lateRlimits: tc.rlimits}
			s.classify(tc.exit, tc.st)
			r := s.res
			if r.Status != tc.status || r.ProcessExitCode() != tc.code {
				t.Fatalf("status %s, exit %d (%s); want %s, %d", r.Status, r.ProcessExitCode(), r.Message, tc.status, tc.code)
			}
			if (r.Signal == nil) != (tc.signal == "") || r.Signal != nil && *r.Signal != tc.signal {
				t.Fatalf("signal %v, want %q", r.Signal, tc.signal)
			}
			if r.Message == "" {
				t.Fatal("no message")
			}
		})
	}
	classifyRlimitCases(t)
}

// classifyRlimitCases: where memory and pids are rlimits, the status is
// memory_limit or pids_limit on the evidence there is, and the Result
// names it (issue 19, point 1); a cgroup's limits keep the kernel's
// evidence alone.
func classifyRlimitCases(t *testing.T) {
	realHostMemory := hostMemory
	sig := func(s unix.Signal) uint32 { return uint32(s) }
	exit1 := &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8}
	rlimitMem := map[string]LimitInfo{"memory": {Value: 1 << 28, Unit: "bytes", EnforcedBy: ByRlimit}}
	rlimitPids := map[string]LimitInfo{"pids": {Value: 32, Unit: "count", EnforcedBy: ByRlimit}}
	cgroupMem := map[string]LimitInfo{"memory": {Value: 1 << 28, Unit: "bytes", EnforcedBy: ByCgroup1}}
	cgroupPids := map[string]LimitInfo{"pids": {Value: 32, Unit: "count", EnforcedBy: ByCgroup2}}
	memErr := "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nMemoryError\n"
	cases := []struct {
		name      string
		killedFor Status
		limits    map[string]LimitInfo
		exit      *StatusMsg
		st        *cgroup.Stats
		stderr    string
		polled    int
		status    Status
		code      int
		hit       bool     // pids_limit_hit
		evidence  Evidence // of the limit of the status, or of pids
		// hostRAM is the host's RAM plus swap (0: sysinfo failed), and
		// overcommit vm.overcommit_memory.
		hostRAM    int64
		overcommit int
	}{
		{"MemoryError at exit 1", "", rlimitMem, exit1, nil, memErr, 0, StatusMemoryLimit, ExitKilled, false, EvidenceMemoryError, 0, 0},
		{"MemoryError with a message", "", rlimitMem, exit1, nil, "MemoryError: cannot allocate\n", 0, StatusMemoryLimit, ExitKilled, false, EvidenceMemoryError, 0, 0},
		{"MemoryError, then more output", "", rlimitMem, exit1, nil, memErr + "cleanup failed\n", 0, StatusExit, 1, false, "", 0, 0},
		{"MemoryError handled, exit 0", "", rlimitMem, &StatusMsg{Kind: kindExit}, nil, memErr, 0, StatusOK, 0, false, "", 0, 0},
		{"MemoryError, exit 2", "", rlimitMem, &StatusMsg{Kind: kindExit, WaitStatus: 2 << 8}, nil, memErr, 0, StatusExit, 2, false, "", 0, 0},
		{"another exception naming MemoryError", "", rlimitMem, exit1, nil, "ValueError: not a MemoryError\n", 0, StatusExit, 1, false, "", 0, 0},
		{"numpy's MemoryError", "", rlimitMem, exit1, nil, "Traceback ...\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 16.0 GiB for an array with shape (2147483648,) and data type float64\n", 0, StatusMemoryLimit, ExitKilled, false, EvidenceMemoryError, 0, 0},
		{"a sentence ending in MemoryError", "", rlimitMem, exit1, nil, "raised a MemoryError\n", 0, StatusExit, 1, false, "", 0, 0},
		{"MemoryError under a cgroup, sysinfo failed", "", cgroupMem, exit1, &cgroup.Stats{}, memErr, 0, StatusExit, 1, false, "", 0, 0},
		{"MemoryError under a cgroup, request past the host", "", cgroupMem, exit1, &cgroup.Stats{}, memErr, 0, StatusMemoryLimit, ExitKilled, false, EvidenceMemoryError, 1 << 34, 0},
		{"MemoryError under a cgroup, limit past the host", "", cgroupMem, exit1, &cgroup.Stats{}, memErr, 0, StatusExit, 1, false, "", 1 << 27, 0},
		{"MemoryError under a cgroup, strict overcommit", "", cgroupMem, exit1, &cgroup.Stats{}, memErr, 0, StatusExit, 1, false, "", 1 << 34, 2},
		{"MemoryError under a cgroup, OOM kill counted, exit 1", "", cgroupMem, exit1, &cgroup.Stats{OOMKills: 1}, memErr, 0, StatusMemoryLimit, ExitKilled, false, EvidenceMemoryError, 1 << 34, 0},
		{"MemoryError without a memory limit", "", map[string]LimitInfo{}, exit1, nil, memErr, 0, StatusExit, 1, false, "", 0, 0},
		{"MemoryError, wall limit", "timeout", rlimitMem, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, nil, memErr, 0, StatusTimeout, ExitTimeLimit, false, "", 0, 0},

		{"tasks at the limit at exit, payload failed", "", rlimitPids, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8, Tasks: 32}, nil, "", 0, StatusPidsLimit, ExitKilled, true, EvidenceTasksSampled, 0, 0},
		{"tasks at the limit polled, payload failed", "", rlimitPids, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8, Tasks: 3}, nil, "", 32, StatusPidsLimit, ExitKilled, true, EvidenceTasksSampled, 0, 0},
		{"tasks at the limit, payload ok", "", rlimitPids, &StatusMsg{Kind: kindExit, Tasks: 32}, nil, "", 0, StatusOK, 0, true, EvidenceTasksSampled, 0, 0},
		{"tasks below the limit, payload failed", "", rlimitPids, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8, Tasks: 31}, nil, "", 31, StatusExit, 1, false, "", 0, 0},
		{"tasks at the limit, killed by a signal", "", rlimitPids, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGSEGV), Tasks: 40}, nil, "", 0, StatusPidsLimit, ExitKilled, true, EvidenceTasksSampled, 0, 0},
		{"tasks at the limit, no report", "", rlimitPids, nil, nil, "", 32, StatusPidsLimit, ExitKilled, true, EvidenceTasksSampled, 0, 0},
		{"tasks at the limit, wall limit", "timeout", rlimitPids, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL), Tasks: 32}, nil, "", 0, StatusTimeout, ExitTimeLimit, false, "", 0, 0},
		{"tasks counted under a cgroup", "", cgroupPids, &StatusMsg{Kind: kindExit, WaitStatus: 1 << 8, Tasks: 40}, &cgroup.Stats{}, "", 0, StatusExit, 1, false, "", 0, 0},
		{"cgroup OOM kill names its evidence", "", cgroupMem, &StatusMsg{Kind: kindExit, WaitStatus: sig(unix.SIGKILL)}, &cgroup.Stats{OOMKills: 1}, "", 0, StatusMemoryLimit, ExitKilled, false, EvidenceOOMKill, 0, 0},
		{"cgroup refused forks name their evidence", "", cgroupPids, exit1, &cgroup.Stats{PidsMaxEvents: 2}, "", 0, StatusPidsLimit, ExitKilled, true, EvidencePidsEvents, 0, 0},
	}
	for _, tc := range cases {
		t.Run("rlimit/"+tc.name, func(t *testing.T) {
			lim := map[string]LimitInfo{}
			for k, v := range tc.limits {
				lim[k] = v
			}
			s := &supervisor{job: &Job{Limits: Limits{MemoryBytes: 1 << 28, Pids: 32}, Timeout: time.Second}, res: &Result{Limits: lim}, killedFor: tc.killedFor}
			s.stderr = newCapture(1<<20, nil)
			s.stderr.Write([]byte(tc.stderr))
			s.sampleTasks(tc.polled)
			hostMemory = func() (int64, int, error) {
				if tc.hostRAM == 0 {
					return 0, 0, errors.New("no sysinfo")
				}
				return tc.hostRAM, tc.overcommit, nil
			}
			defer func() { hostMemory = realHostMemory }()
			s.classify(tc.exit, tc.st)
			r := s.res
			if r.Status != tc.status || r.ProcessExitCode() != tc.code || r.PidsLimitHit != tc.hit {
				t.Fatalf("status %s, exit %d, pids_limit_hit %v (%s); want %s, %d, %v", r.Status, r.ProcessExitCode(), r.PidsLimitHit, r.Message, tc.status, tc.code, tc.hit)
			}
			var got Evidence
			for _, li := range r.Limits {
				if li.Evidence != "" {
					if got != "" {
						t.Fatalf("two limits have evidence: %+v", r.Limits)
					}
					got = li.Evidence
				}
			}
			if got != tc.evidence {
				t.Fatalf("evidence %q, want %q (%+v)", got, tc.evidence, r.Limits)
			}
			if r.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

// TestPidsPeak: usage.pids_peak is the cgroup's, else the sampled count,
// else null; never 0 for unknown (issue 19, point 1).
func TestPidsPeak(t *testing.T) {
	for _, tc := range []struct {
		name   string
		st     *cgroup.Stats
		exit   *StatusMsg
		polled int
		want   int64 // -1: null
		source string
	}{
		{"cgroup", &cgroup.Stats{PidsPeak: 9}, &StatusMsg{Tasks: 7}, 8, 9, PidsPeakCgroup},
		{"cgroup without pids.peak", &cgroup.Stats{}, &StatusMsg{Tasks: 7}, 0, 7, PidsPeakSampled},
		{"init's count", nil, &StatusMsg{Tasks: 7}, 5, 7, PidsPeakSampled},
		{"poll's count", nil, &StatusMsg{Tasks: 3}, 30, 30, PidsPeakSampled},
		{"no report, polled", nil, nil, 12, 12, PidsPeakSampled},
		{"unknown", nil, nil, 0, -1, ""},
		{"old init, no count", nil, &StatusMsg{}, 0, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &supervisor{job: &Job{}, res: &Result{}}
			s.sampleTasks(tc.polled)
			s.fillPidsPeak(tc.st, tc.exit)
			u := s.res.Usage
			if tc.want < 0 {
				if u.PidsPeak != nil || u.PidsPeakSource != "" {
					t.Fatalf("pids_peak %d (%s), want null", *u.PidsPeak, u.PidsPeakSource)
				}
				return
			}
			if u.PidsPeak == nil || *u.PidsPeak != tc.want || u.PidsPeakSource != tc.source {
				t.Fatalf("pids_peak %v (%s), want %d (%s)", u.PidsPeak, u.PidsPeakSource, tc.want, tc.source)
			}
		})
	}
}

func TestStatThreads(t *testing.T) {
	for line, want := range map[string]int{
		"1 (sbx) S 0 1 1 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 7 0 100 1 2\n":        7,
		"42 (a) b (c) S 1 42 42 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 3 0 100 1 2\n": 3,
		"42 (x) Z 1 42 42 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 1 0 100 0 0\n":       1,
		"42 (short) S 1 42\n": 0,
		"no paren":            0,
		"42 (x) S 1 42 42 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 -1 0 100 1 2\n": 0,
	} {
		if got := statThreads([]byte(line)); got != want {
			t.Errorf("statThreads(%q) = %d, want %d", line, got, want)
		}
	}
}
