package nsjail

import (
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
}
