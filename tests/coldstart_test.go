//go:build integration

package tests

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// timelineSteps are the step names of a --debug-timings timeline.
func timelineSteps(stderr string) []string {
	var steps []string
	for _, line := range strings.Split(stderr, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "[sbx:timings]" {
			steps = append(steps, strings.Join(f[3:], " "))
		}
	}
	return steps
}

// TestBuiltinFiltersArePrecompiled: a run under a built-in policy loads
// the filter embedded at build time and compiles nothing with libseccomp
// on its way to ready (issue 13: compiling the allowlist took ~20 ms of
// the supervisor's CPU, on the critical path of every strict run). The
// embedded program equals a fresh compile: seccomp's
// TestPrecompiledFilters.
func TestBuiltinFiltersArePrecompiled(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, profile := range []string{"strict", "standard", "data", data("profiles/no-seccomp.toml")} {
			out := r.exec(t, "", "exec", "--profile", profile, "--debug-timings", "--", "/bin/true")
			if out.code != 0 {
				t.Fatalf("profile %s: exit %d: %s", profile, out.code, out.stderr)
			}
			steps := strings.Join(timelineSteps(out.stderr), "\n")
			if !strings.Contains(steps, "sbx: seccomp filter precompiled") || strings.Contains(steps, "sbx: seccomp filter compiled") {
				t.Errorf("profile %s: the filter was not the precompiled one:\n%s", profile, out.stderr)
			}
		}
	})
}

// TestInitOnOneCPU: sbx confined to one CPU (taskset here; a one-CPU
// edge host, a cpuset) runs its payload. The init's Go runtime once took
// its P count from the CPUs it may use, and with one P it deadlocked on
// the payload's vfork while the seccomp hold waited for the denial server
// (nsjail/lean_linux.go): every run ended at the 30 s setup timeout. The
// init now starts on one P on any host and takes a second for the length
// of each fork (nsjail forkExecOnTwoPs): that second P must work where
// only one CPU does.
func TestInitOnOneCPU(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset (util-linux) is not installed")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	cpu := 0
	for !set.IsSet(cpu) {
		cpu++
	}
	forEach(t, func(t *testing.T, r runner) {
		for _, profile := range []string{"strict", "standard"} {
			sbx := r.command("exec", "--profile", profile, "-c", "import os; print(len(os.sched_getaffinity(0)))")
			cmd := exec.Command("taskset", append([]string{"--cpu-list", strconv.Itoa(cpu)}, sbx.Args...)...)
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			err := cmd.Run()
			if err != nil || so.String() != "1\n" {
				t.Errorf("profile %s on CPU %d alone: %v, stdout %q, stderr %s", profile, cpu, err, so.String(), se.String())
			}
		}
	})
}

// TestInitWaitsOnOneP: once the payload has exec'd, the init runs on one
// P (nsjail waitOnOneP), for a payload started directly, through the
// Python runner, and with each built-in policy. With a second P the init's
// runtime kept one P in the reaper's wait4 for 10 ms while the other
// idled, and sysmon polled every 20 µs meanwhile: on the payload's CPUs,
// 16-20 preemptions of python3 -S -c pass per run (issue 13). The step
// names the P count the init's runtime reports after the change.
func TestInitWaitsOnOneP(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, tc := range []struct{ profile, how string }{
			{"strict", "direct"}, {"standard", "direct"}, {"strict", "runner"}, {data("profiles/no-seccomp.toml"), "direct"},
		} {
			args := []string{"exec", "--profile", tc.profile, "--debug-timings", "--", "/usr/bin/python3", "-S", "-c", "pass"}
			if tc.how == "runner" {
				args = []string{"exec", "--profile", tc.profile, "--debug-timings", "-c", "pass"}
			}
			out := r.exec(t, "", args...)
			if out.code != 0 {
				t.Fatalf("%s, %s: exit %d: %s", tc.profile, tc.how, out.code, out.stderr)
			}
			// The init's own steps, in its order: the supervisor's marks
			// ("sbx: got ready", read as the init goes on) interleave by
			// time, and may fall between the two.
			var steps []string
			for _, s := range timelineSteps(out.stderr) {
				if strings.HasPrefix(s, "init: ") {
					steps = append(steps, s)
				}
			}
			i := slices.Index(steps, "init: fork+exec payload")
			j := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "init: GOMAXPROCS ") })
			if i < 0 || j != i+1 || steps[j] != "init: GOMAXPROCS 1 while the payload runs" {
				t.Errorf("%s, %s: want the init's \"init: GOMAXPROCS 1 while the payload runs\" right after its \"init: fork+exec payload\":\n%s", tc.profile, tc.how, out.stderr)
			}
		}
	})
}

// TestInitWarmsStatusLineTypes: the init builds encoding/json's caches
// for its status line on its second P while it mounts (nsjail warmWire),
// under strict, standard and no filter, and through the Python runner,
// so that its "ready" line is not the type's cold first use: that cold
// encode put "sbx: got ready" 0.5-0.65 ms after the filter's load,
// 0.16-0.24 ms with the warm-up (issue 13, "the init's start"). The
// warm-up starts only once the Spec is decoded: beside that decode it
// slowed it (issue 13, "the init's start, sixth pass"), so its start's
// mark and its own come after "init: read spec". Its own may come after
// the marks were sent on a loaded host (the "ready" encode then does the
// work itself, as before), so it must be in at least one run's timeline,
// and after "read spec" wherever it is; and every run succeeds.
func TestInitWarmsStatusLineTypes(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		sawWarmed := false
		for _, tc := range []struct{ profile, how string }{
			{"strict", "direct"}, {"standard", "direct"}, {"strict", "runner"}, {data("profiles/no-seccomp.toml"), "direct"},
		} {
			args := []string{"exec", "--profile", tc.profile, "--debug-timings", "--", "/usr/bin/python3", "-S", "-c", "print('ok')"}
			if tc.how == "runner" {
				args = []string{"exec", "--profile", tc.profile, "--debug-timings", "-c", "print('ok')"}
			}
			out := r.exec(t, "", args...)
			if out.code != 0 || out.stdout != "ok\n" {
				t.Fatalf("%s, %s: exit %d, stdout %q: %s", tc.profile, tc.how, out.code, out.stdout, out.stderr)
			}
			steps := timelineSteps(out.stderr)
			// The main thread marks "read spec", then starts the
			// warm-up and marks that: both orders are fixed. The
			// goroutine's own mark may come before the start's (it can
			// finish while the main thread is descheduled), or after
			// the marks were sent, when the host is loaded: so it must
			// follow "read spec" when it is there, and be there in at
			// least one of the runs.
			spec, start, warmed := slices.Index(steps, "init: read spec"), slices.Index(steps, "init: start status line's JSON warm-up"), slices.Index(steps, "init: status line's JSON types warmed")
			if warmed >= 0 {
				sawWarmed = true
			}
			if spec < 0 || start < spec || (warmed >= 0 && warmed < spec) {
				t.Errorf("%s, %s: want \"init: read spec\", then \"init: start status line's JSON warm-up\" and \"init: status line's JSON types warmed\" after it; at %d, %d and %d of the timeline:\n%s", tc.profile, tc.how, spec, start, warmed, out.stderr)
			}
			if !slices.Contains(steps, "sbx: got ready") {
				t.Errorf("%s, %s: no \"sbx: got ready\" in the timeline:\n%s", tc.profile, tc.how, out.stderr)
			}
		}
		if !sawWarmed {
			t.Errorf("no run's timeline has \"init: status line's JSON types warmed\": the init did not warm the status line's types")
		}
	})
}

// TestResultJSONTypesWarmed: under --json the supervisor builds
// encoding/json's caches for the Result while the payload runs (nsjail
// warmResultJSON), so that the Result's encode after the payload's exit
// is not the type's cold first use (~0.4 ms, issue 13, "the last round
// trips"); a run that streams its output does not pay for it. The mark
// may come late on a loaded host, but always before the Result is built:
// only its presence and place are asserted, never a time.
func TestResultJSONTypesWarmed(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--json", "--profile", "strict", "--debug-timings", "--", "/usr/bin/python3", "-S", "-c", "print('ok')")
		if out.code != 0 || !strings.Contains(out.stdout, `"stdout": "ok\n"`) {
			t.Fatalf("--json: exit %d, stdout %q: %s", out.code, out.stdout, out.stderr)
		}
		steps := timelineSteps(out.stderr)
		warmed, ready := slices.Index(steps, "sbx: Result's JSON types warmed"), slices.Index(steps, "sbx: result ready")
		if warmed < 0 || ready < 0 || warmed > ready {
			t.Errorf("--json: \"sbx: Result's JSON types warmed\" at %d, \"sbx: result ready\" at %d of the timeline:\n%s", warmed, ready, out.stderr)
		}
		out = r.exec(t, "", "exec", "--profile", "strict", "--debug-timings", "--", "/usr/bin/python3", "-S", "-c", "print('ok')")
		if out.code != 0 || out.stdout != "ok\n" {
			t.Fatalf("streamed: exit %d, stdout %q: %s", out.code, out.stdout, out.stderr)
		}
		if slices.Contains(timelineSteps(out.stderr), "sbx: Result's JSON types warmed") {
			t.Errorf("a streamed run warmed the Result's JSON it never prints:\n%s", out.stderr)
		}
	})
}

// TestOwnPackageInitsAreLight: every sbx process runs every package's
// init, the sandbox's init process included (it is the same binary), so
// sbx's own packages compile nothing at init time. serve's X-Request-Id
// regexp ({1,64} expands to 64 copies) cost 0.23 ms and 860 allocations
// at init, twice per run (issue 13); it is compiled on first use now.
// GODEBUG=inittrace=1 (runtime package docs) prints each package init's
// allocations; 4 KiB is above every one of sbx's own now (at most ~1.5 KB)
// and below the 5.4 KB and 58 KB engine and serve made with their regexps.
func TestOwnPackageInitsAreLight(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		cmd := r.command("--version")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("sbx --version: %v: %s", err, se.String())
		}
		seen := 0
		for _, line := range strings.Split(se.String(), "\n") {
			// init github.com/sbx-sandbox/sbx/serve @10 ms, 0 ms clock, 72 bytes, 2 allocs
			f := strings.Fields(line)
			if len(f) < 11 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/sbx-sandbox/sbx/") || f[8] != "bytes," {
				continue
			}
			seen++
			n, err := strconv.Atoi(f[7])
			if err != nil {
				t.Fatalf("inittrace line %q: %v", line, err)
			}
			if n > 4096 {
				t.Errorf("package %s allocates %d bytes at init (want ≤ 4096: compile on first use): %s", f[1], n, line)
			}
		}
		if seen < 5 {
			t.Fatalf("inittrace named %d of sbx's packages, want ≥ 5 (GODEBUG=inittrace=1 ignored?): %s", seen, se.String())
		}
	})
}

// TestUnprivilegedSupervisorRunsOnOneP: an unprivileged `sbx exec` runs
// its supervisor with GOMAXPROCS 1 from its package inits on
// (internal/leanexec, issue 13: with two Ps it spent ~2.5 ms more of its
// own CPU per run on spinning Ms, futexes and sysmon polls, with one more
// thread and 320 KB more memory); as root it keeps them all, since its
// cgroup v1 attach blocks in the kernel for milliseconds and one P then
// stalled the rest (wall +7 ms). The runtime says so itself:
// GODEBUG=schedtrace prints the P count every period from sysmon. The
// first line (0 ms) may come before the package inits; the later ones are
// from the run. The init does not get sbx's environment, so every line is
// the supervisor's.
func TestUnprivilegedSupervisorRunsOnOneP(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		want := "gomaxprocs=1"
		if r.uid == 0 {
			if runtime.NumCPU() == 1 {
				t.Skip("one CPU: root's default is one P too")
			}
			want = "gomaxprocs=" + strconv.Itoa(runtime.NumCPU())
		}
		cmd := r.command("exec", "--profile", "strict", "--", "/usr/bin/python3", "-S", "-c", "import time; time.sleep(1.5)")
		cmd.Env = append(os.Environ(), "GODEBUG=schedtrace=250")
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("sbx exec: %v: %s", err, se.String())
		}
		late := 0
		for _, line := range strings.Split(se.String(), "\n") {
			// SCHED 501ms: gomaxprocs=1 idleprocs=1 threads=6 ...
			f := strings.Fields(line)
			if len(f) < 3 || f[0] != "SCHED" || f[1] == "0ms:" {
				continue
			}
			late++
			if f[2] != want {
				t.Errorf("supervisor during the run: %s (want %s)", line, want)
			}
		}
		if late == 0 {
			t.Fatalf("no schedtrace line after 0 ms (GODEBUG=schedtrace ignored?): %s", se.String())
		}
	})
}
