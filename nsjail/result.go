package nsjail

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/version"
)

// newResult is the one constructor of a Result: every list of the schema
// starts as [] and every object as {}, so that a Result of any status has
// the same shape (issue 19, point 2: a client's `for f in r["files"]`
// crashed on a setup_error's null).
func newResult(id, profile string, start time.Time) *Result {
	r := &Result{ID: id, Profile: profile, Version: version.Version(), Commit: version.Commit(), StartedAt: start.UTC()}
	r.FillEmpty()
	return r
}

// classifyWait fills r's Status, ExitCode, Signal and Message from the
// wait status of the payload, when no limit or setup failure decided them.
func classifyWait(r *Result, ws unix.WaitStatus) {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		r.Status, r.ExitCode = StatusOK, 0
		r.Message = "exited with status 0"
	case ws.Exited():
		r.Status, r.ExitCode = StatusExit, ws.ExitStatus()
		r.Message = fmt.Sprintf("exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		sig := ws.Signal()
		name := unix.SignalName(sig)
		if name == "" {
			name = fmt.Sprintf("SIG%d", int(sig))
		}
		r.Status, r.ExitCode, r.Signal = StatusSignal, 128+int(sig), &name
		r.Message = fmt.Sprintf("killed by %s", name)
		if ws.CoreDump() {
			r.Message += " (core dumped)"
		}
	default:
		r.Status, r.ExitCode = StatusSetupError, ExitSbxFailed
		r.Message = fmt.Sprintf("payload ended with unexpected wait status %#x", uint32(ws))
	}
}
