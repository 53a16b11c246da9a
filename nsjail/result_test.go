package nsjail

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestClassifyWait(t *testing.T) {
	cases := []struct {
		name   string
		ws     unix.WaitStatus
		status Status
		code   int
		signal string
	}{
		{"exit 0", 0, StatusOK, 0, ""},
		{"exit 3", 3 << 8, StatusExit, 3, ""},
		{"SIGSEGV", unix.WaitStatus(unix.SIGSEGV), StatusSignal, 139, "SIGSEGV"},
		{"SIGKILL", unix.WaitStatus(unix.SIGKILL), StatusSignal, 137, "SIGKILL"},
		{"SIGABRT with core", unix.WaitStatus(unix.SIGABRT) | 0x80, StatusSignal, 134, "SIGABRT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			classifyWait(&r, tc.ws)
			if r.Status != tc.status || r.ExitCode != tc.code {
				t.Fatalf("got %s/%d, want %s/%d", r.Status, r.ExitCode, tc.status, tc.code)
			}
			if (r.Signal == nil) != (tc.signal == "") || (r.Signal != nil && *r.Signal != tc.signal) {
				t.Fatalf("signal %v, want %q", r.Signal, tc.signal)
			}
			if r.Message == "" {
				t.Fatal("no message")
			}
			if r.ProcessExitCode() != tc.code {
				t.Fatalf("ProcessExitCode() = %d, want %d", r.ProcessExitCode(), tc.code)
			}
		})
	}
}

func TestProcessExitCode(t *testing.T) {
	for status, want := range map[Status]int{
		StatusTimeout: 124, StatusCPULimit: 124, StatusMemoryLimit: 137, StatusPidsLimit: 137,
		StatusOutputLimit: 137, StatusSeccomp: 137, StatusSetupError: 125,
	} {
		r := Result{Status: status, ExitCode: 99}
		if got := r.ProcessExitCode(); got != want {
			t.Errorf("%s: exit %d, want %d", status, got, want)
		}
	}
}

// TestExecFailureExitCodes: a payload that never ran exits like a shell
// says: 127 not found, 126 cannot execute (issue 19, point 4).
func TestExecFailureExitCodes(t *testing.T) {
	for st, want := range map[Status]int{StatusNotFound: ExitNotFound, StatusCannotExec: ExitCannotExec} {
		if got := (&Result{Status: st}).ProcessExitCode(); got != want {
			t.Errorf("%s: ProcessExitCode() = %d, want %d", st, got, want)
		}
	}
}
