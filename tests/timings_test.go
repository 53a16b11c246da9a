//go:build integration

package tests

import (
	"fmt"
	"os"
	"slices"
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
			if f := strings.Fields(line); len(f) > 3 && f[0] == "[sbx:timings]" && f[1] != "at" { // not the header
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
		// The timeline starts before main: at the C constructors, once the
		// static glibc has started; main's step is Go's runtime and the
		// package inits.
		if a, b := at("sbx: C constructors ran (after libc's start, before Go's runtime)"), at("sbx: main started (Go's runtime and package inits done)"); a != 0 || b != 1 {
			t.Errorf("the timeline starts with steps %d and %d, want the constructors' (0) and main's (1):\n%s", a, b, out.stderr)
		}
		order := []string{"init: read spec", "init: pivot_root", "init: mask /proc", "init: read confine", "init: set no_new_privs", "init: load seccomp filter", "init: read payload", "init: write inputs", "init: fork+exec payload"}
		for i := 1; i < len(order); i++ {
			if a, b := at(order[i-1]), at(order[i]); a >= 0 && b >= 0 && a > b {
				t.Errorf("%q comes after %q:\n%s", order[i-1], order[i], out.stderr)
			}
		}
		// The end, step by step: the report, the init's last fd closed,
		// its reap (issue 13, "the last round trips").
		for _, s := range []string{"sbx: seccomp filter precompiled", "sbx: sandbox ready", "sbx: got started", "sbx: got exit", "sbx: workspace report read", "sbx: status pipe closed", "sbx: init's wait returned", "sbx: result ready"} {
			at(s)
		}
	})
}

// TestExecPayloadFollowsTheConfine: sbx exec knows its payload before the
// sandbox exists, so the supervisor writes it right after the Confine and
// the init reads it as soon as it is confined, without waiting for the
// supervisor to see "ready" and answer (issue 13, "the last round
// trips"). The input file's bytes follow it on the same pipe, and stdin
// still reaches the payload. The order is asserted, never a time: the
// mark is taken before the write, and the init's "read payload" after it
// decoded what was written.
func TestExecPayloadFollowsTheConfine(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "from stdin", "exec", "--profile", "strict", "--debug-timings", "--file", data("env.py")+":in/env.py", "--",
			"/usr/bin/python3", "-S", "-c", "import sys; print(len(open('in/env.py').read())); print(sys.stdin.read())")
		want, err := os.ReadFile(data("env.py"))
		if err != nil {
			t.Fatal(err)
		}
		if out.code != 0 || out.stdout != fmt.Sprintf("%d\nfrom stdin\n", len(want)) {
			t.Fatalf("exit %d, stdout %q: %s", out.code, out.stdout, out.stderr)
		}
		steps := timelineSteps(out.stderr)
		order := []string{"sbx: payload sent after the confine", "init: read payload", "init: write inputs", "init: fork+exec payload", "sbx: got started"}
		prev := -1
		for _, s := range order {
			i := slices.Index(steps, s)
			if i < 0 || i < prev {
				t.Fatalf("%q missing or out of order (%v):\n%s", s, order, out.stderr)
			}
			prev = i
		}
	})
}
