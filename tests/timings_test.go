//go:build integration

package tests

import (
	"strings"
	"testing"
)

// TestDebugTimingsShowEveryStep: --debug-timings lists the supervisor's
// and the init's steps, the confinement before "ready" and the payload's
// after it, whichever message carried them (the init's marks go with
// the payload's start since the request asks for them: issue 12).
func TestDebugTimingsShowEveryStep(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--profile", "strict", "--debug-timings", "--file", data("env.py")+":in/env.py", "-c", "pass")
		if out.code != 0 {
			t.Fatalf("exit %d: %s", out.code, out.stderr)
		}
		var steps []string
		for _, line := range strings.Split(out.stderr, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[0] == "[sbx:timings]" {
				steps = append(steps, strings.Join(f[3:], " "))
			}
		}
		at := func(step string) int {
			for i, s := range steps {
				if s == step {
					return i
				}
			}
			t.Errorf("no step %q in the timeline:\n%s", step, out.stderr)
			return -1
		}
		order := []string{"init: read spec", "init: pivot_root", "init: mask /proc", "init: read confine", "init: set no_new_privs", "init: load seccomp filter", "init: read payload", "init: write inputs", "init: fork+exec payload"}
		for i := 1; i < len(order); i++ {
			if a, b := at(order[i-1]), at(order[i]); a >= 0 && b >= 0 && a > b {
				t.Errorf("%q comes after %q:\n%s", order[i-1], order[i], out.stderr)
			}
		}
		for _, s := range []string{"sbx: seccomp filter precompiled", "sbx: sandbox ready", "sbx: got started", "sbx: got exit", "sbx: result ready"} {
			at(s)
		}
	})
}
