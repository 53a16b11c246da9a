package nsjail

import "errors"

// abortCause is why the supervisor ended a run that no limit ended: the
// run then fails with an error, not a status of its own.
type abortCause int

const (
	notAborted   abortCause = iota
	abortFraming            // the status pipe broke its protocol
	abortSetup              // the start, or the payload's exec, took too long
	abortCancel             // the context was cancelled (sbx got SIGINT, a server's client left)
)

// killed reports whether the supervisor ended the run, for a limit
// (killedFor) or otherwise (aborted), rather than the payload itself.
func (s *supervisor) killed() bool {
	return s.killedFor != "" || s.aborted != notAborted
}

// errCanceled is a run that its caller ended (the context), reported as
// StatusCanceled rather than as a setup error.
var errCanceled = errors.New("run cancelled")
