//go:build integration

package tests

import (
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
	"golang.org/x/sys/unix"
)

// TestForgedStatus: a payload that sends itself the signal a limit or the
// filter would send gets status signal, not the limit's (issue 11,
// finding 8). Under both profiles: standard's CPU limit is watched by the
// cgroup as root, strict's is RLIMIT_CPU for uid 65534 without one.
func TestForgedStatus(t *testing.T) {
	for _, sig := range []unix.Signal{unix.SIGXCPU, unix.SIGSYS} {
		name := unix.SignalName(sig)
		for _, profile := range []string{"standard", "strict"} {
			t.Run(name+"/"+profile, func(t *testing.T) {
				forEach(t, func(t *testing.T, r runner) {
					res, out := r.result(t, "--profile", profile, "-c",
						"import os, signal; print('sending', flush=True); os.kill(os.getpid(), signal."+name+")")
					if res.Status != nsjail.StatusSignal || res.Signal == nil || *res.Signal != name ||
						res.ExitCode != 128+int(sig) || out.code != 128+int(sig) {
						sigName := "null"
						if res.Signal != nil {
							sigName = *res.Signal
						}
						t.Fatalf("status %s, signal %s, exit_code %d, sbx exit %d (%s); want signal, %s, %d",
							res.Status, sigName, res.ExitCode, out.code, res.Message, name, 128+int(sig))
					}
					if res.Stdout != "sending\n" || !strings.Contains(res.Message, name) {
						t.Errorf("stdout %q, message %q", res.Stdout, res.Message)
					}
				})
			})
		}
	}
}
