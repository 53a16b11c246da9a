//go:build integration

package tests

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The supervisor of `sbx exec` collects at GOGC=200 (internal/leanexec,
// issue 13): with 6 MB of output kept and printed as JSON, every GC cycle
// it runs has a goal of at least 8 MB, where Go's default starts at 4; and
// a GOGC of the user's own wins.
func TestExecSupervisorGCPercent(t *testing.T) {
	code := `import sys; sys.stdout.write("o" * (3 << 20)); sys.stderr.write("e" * (3 << 20))`
	// goals runs the payload and returns the goal, in MB, of each GC cycle
	// of the supervisor (the init is given an environment of its own, so
	// gctrace lines are the supervisor's).
	goals := func(t *testing.T, r runner, env ...string) []int {
		cmd := r.command("exec", "--json", "--output-limit", "8M", "--", "/usr/bin/python3", "-S", "-c", code)
		cmd.Env = append(append(os.Environ(), "GODEBUG=gctrace=1"), env...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("sbx exec: %v: %s", err, se.String())
		}
		if !strings.Contains(so.String(), `"status": "ok"`) {
			t.Fatalf("the run did not end ok: %.300s", so.String())
		}
		var out []int
		for _, line := range strings.Split(se.String(), "\n") {
			// gc 1 @0.111s 0%: ... 3->3->1 MB, 4 MB goal, 0 MB stacks, ...
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "gc" {
				continue
			}
			for i := 1; i+1 < len(f); i++ {
				if strings.TrimSuffix(f[i+1], ",") == "goal" && f[i] == "MB" {
					g, err := strconv.Atoi(f[i-1])
					if err != nil {
						t.Fatalf("gctrace line %q: %v", line, err)
					}
					out = append(out, g)
				}
			}
		}
		return out
	}
	forEach(t, func(t *testing.T, r runner) {
		g := goals(t, r)
		if len(g) == 0 {
			t.Fatal("no GC cycle with 12 MB of output and JSON held: GODEBUG=gctrace=1 ignored?")
		}
		for _, goal := range g {
			if goal < 8 {
				t.Errorf("a GC cycle of the supervisor had a %d MB goal, want >= 8 (GOGC=200): goals %v", goal, g)
			}
		}
		if g := goals(t, r, "GOGC=100"); len(g) == 0 || g[0] >= 8 {
			t.Errorf("with GOGC=100 given, the first goal is %v MB, want Go's default 4 (the user's GOGC wins)", g)
		}
	})
}
