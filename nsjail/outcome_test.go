package nsjail

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/cgroup"
)

// TestOutcomeEnds: the outcomes TestClassify's table does not reach,
// because they are decided around classify: the init dying without a
// status, a setup error, a run its caller cancelled, and the pids limit
// hit without being fatal (issue 12, item 5).
func TestOutcomeEnds(t *testing.T) {
	newSup := func(killedFor Status) *supervisor {
		return &supervisor{job: &Job{Limits: Limits{Pids: 8}, Timeout: time.Second}, res: &Result{Limits: map[string]LimitInfo{}}, killedFor: killedFor}
	}
	for _, tc := range []struct {
		name      string
		killedFor Status
		exit      *StatusMsg // the init's exit message; nil: none came
		err       error      // what the run returned instead of an exit
		status    Status
		code      int
		message   string
	}{
		{"the init died without a status", "", nil, nil, StatusSetupError, ExitSbxFailed, "sbx init ended without a status"},
		{"the init died after the wall limit's kill", StatusTimeout, nil, nil, StatusTimeout, ExitTimeLimit, "wall-clock limit"},
		{"a setup error", "", nil, errors.New("mount /proc: EPERM"), StatusSetupError, ExitSbxFailed, "mount /proc: EPERM"},
		{"cancelled by the caller", "", nil, fmt.Errorf("%w: the client went away", errCanceled), StatusCanceled, ExitSbxFailed, "the client went away"},
		{"an exit message, through finish", "", &StatusMsg{Kind: kindExit}, nil, StatusOK, 0, "exited with status 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSup(tc.killedFor)
			err := tc.err
			if err == nil {
				err = s.finish(tc.exit, &exec.Cmd{}, errors.New("wait: no child"))
			}
			r := s.result(err)
			if r.Status != tc.status || r.ProcessExitCode() != tc.code || !strings.Contains(r.Message, tc.message) {
				t.Fatalf("%s, exit %d, %q; want %s, %d, a message with %q", r.Status, r.ProcessExitCode(), r.Message, tc.status, tc.code, tc.message)
			}
			if r.Files == nil || r.Inputs == nil || r.Network == nil || r.Limits == nil || r.Layers == nil {
				t.Errorf("lists left null: %+v", r)
			}
		})
	}

	// Forks refused at the pids limit, but the payload coped and exited
	// 0: ok, and pids_limit_hit says it happened.
	s := newSup("")
	s.classify(&StatusMsg{Kind: kindExit}, &cgroup.Stats{PidsMaxEvents: 4})
	if s.res.Status != StatusOK || !s.res.PidsLimitHit {
		t.Errorf("pids hit, not fatal: %s, pids_limit_hit %v; want ok, true", s.res.Status, s.res.PidsLimitHit)
	}
}
