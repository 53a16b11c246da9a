//go:build integration

// Package pool tests warm sandboxes (nsjail.Spec.Warm) and the pool of
// them (package pool) as Go handles. The test binary hosts the init
// (STYLE.md, practice 12), as tests/handle does.
package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/tests/internal/selfhost"
)

func TestMain(m *testing.M) { selfhost.Main(m) }

// job is the named profile's run, as sbx exec builds it; warm adds the
// interpreter started ahead with preload.
func job(t testing.TB, profile string, warm bool, preload ...string) *nsjail.Job {
	t.Helper()
	prof, err := profiles.Load(profile)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := prof.Spec(fmt.Sprintf("pool%d", time.Now().UnixNano()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if warm {
		spec.Warm = &nsjail.Warm{Interpreter: "python3", Preload: preload}
	}
	return &nsjail.Job{
		Spec:        spec,
		OutputLimit: int64(prof.Limits.Output),
		Timeout:     time.Duration(prof.Limits.WallTime),
		Limits: nsjail.Limits{
			MemoryBytes: int64(prof.Limits.Memory),
			Pids:        prof.Limits.Pids,
			CPUs:        prof.Limits.CPUs,
			CPUTime:     time.Duration(prof.Limits.CPUTime),
		},
	}
}

func skipIfNoSandbox(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("SBX_MUST_WORK") != "1" && strings.Contains(err.Error(), "user namespace") {
		t.Skipf("no sandbox as uid %d here: %v", os.Geteuid(), err)
	}
	t.Fatalf("Start: %v", err)
}

// probe prints what a payload sees of itself, as one JSON object.
const probe = `import json, os, sys
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
status = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k.startswith("Cap") or k in ("NoNewPrivs", "Seccomp", "Seccomp_filters"):
        status[k] = v.strip()
print(json.dumps({
    "argv": sys.argv, "orig_argv": sys.orig_argv, "name": __name__, "file": globals().get("__file__"),
    "path0": sys.path[0], "env": dict(os.environ), "env_order": list(os.environ), "cwd": os.getcwd(),
    "fds": fds, "status": status, "workspace": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp")),
    "globals": sorted(k for k in globals() if k not in ("json", "os", "sys", "fds", "status", "line", "k", "_", "v")),
    "loader": type(__loader__).__name__, "spec": repr(__spec__), "stdin": sys.stdin.read(),
}, sort_keys=True))
`

// writeProbe puts src in a fresh host directory as name and returns the
// payload's input for it.
func writeProbe(t *testing.T, name, src string) nsjail.File {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return nsjail.File{Path: name, Source: p, Mode: 0o644}
}

// runCold runs the payload in a sandbox built for it (nsjail.Run).
func runCold(t *testing.T, profile string, p nsjail.Payload) *nsjail.Result {
	t.Helper()
	j := job(t, profile, false)
	j.Payload = p
	return nsjail.Run(context.Background(), j)
}

// startWarm starts a warm sandbox and returns it with its interpreter's
// host pid.
func startWarm(t *testing.T, profile string, preload ...string) (*nsjail.Sandbox, int) {
	t.Helper()
	sb, err := nsjail.Start(context.Background(), job(t, profile, true, preload...))
	if err != nil {
		skipIfNoSandbox(t, err)
	}
	t.Cleanup(func() { sb.Close() })
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sb.InitPid(), sb.InitPid()))
	if err != nil {
		t.Fatalf("the init's children: %v", err)
	}
	kids := strings.Fields(string(b))
	if len(kids) != 1 {
		t.Fatalf("the warm init has children %q, want one (the interpreter)", kids)
	}
	var pid int
	fmt.Sscan(kids[0], &pid)
	return sb, pid
}

func decodeProbe(t *testing.T, what string, res *nsjail.Result) map[string]any {
	t.Helper()
	if res.Status != nsjail.StatusOK {
		t.Fatalf("%s: status %s exit %d message %q stderr %q", what, res.Status, res.ExitCode, res.Message, res.Stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &m); err != nil {
		t.Fatalf("%s: stdout %q: %v", what, res.Stdout, err)
	}
	return m
}

// TestWarmLikeCold: a payload run by a warm sandbox's waiting interpreter
// sees itself exactly as it would in a cold run: argv, __main__,
// __file__, sys.path[0], environment (and its order), cwd, open fds, the
// capability, no_new_privs and seccomp lines of /proc/self/status, an
// empty /tmp and a workspace holding only its inputs. The same for
// `python3 -c CODE`, and for tracebacks. Under strict (the allowlist) and
// standard, as root and as uid 65534.
func TestWarmLikeCold(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		for _, profile := range []string{"strict", "standard"} {
			t.Run(profile, func(t *testing.T) { warmLikeCold(t, profile) })
		}
	})
}

func warmLikeCold(t *testing.T, profile string) {
	in := writeProbe(t, "probe.py", probe)
	cases := []struct {
		name string
		p    nsjail.Payload
	}{
		{"script", nsjail.Payload{Argv: []string{"python3", "/workspace/probe.py", "one", "two words"}, Files: []nsjail.File{in}, Env: []string{"EXTRA=1"}}},
		{"relative script", nsjail.Payload{Argv: []string{"python3", "probe.py"}, Files: []nsjail.File{in}}},
		{"-c", nsjail.Payload{Argv: []string{"python3", "-c", probe, "arg"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cold := decodeProbe(t, "cold", runCold(t, profile, tc.p))
			sb, _ := startWarm(t, profile, "json")
			res, err := sb.Exec(context.Background(), tc.p, nsjail.IO{})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			warm := decodeProbe(t, "warm", res)
			for k, cv := range cold {
				cj, _ := json.Marshal(cv)
				wj, _ := json.Marshal(warm[k])
				if string(cj) != string(wj) {
					t.Errorf("%s: warm %s, cold %s", k, wj, cj)
				}
			}
			if fds := fmt.Sprint(warm["fds"]); fds != "[0 1 2 3]" {
				t.Errorf("fds %s: want 0-2 and the listing's own", fds)
			}
		})
	}
	// How a payload ends, as the interpreter reports it: the same
	// status, exit code, stdout and stderr warm and cold.
	ends := []struct{ name, src string }{
		{"traceback", "import sys\ndef f():\n    raise ValueError('boom')\nprint('before')\nf()\n"},
		{"chained", "try:\n    1/0\nexcept Exception as e:\n    raise KeyError('k') from e\n"},
		{"exit code", "import sys\nprint('x')\nsys.exit(5)\n"},
		{"exit message", "raise SystemExit('bye')\n"},
		{"syntax error", "x = (\n"},
		{"keyboard interrupt", "import atexit\natexit.register(lambda: print('atexit'))\nraise KeyboardInterrupt\n"},
		{"atexit and threads", "import atexit, threading, time\natexit.register(lambda: print('atexit'))\nthreading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\nprint('main')\n"},
		{"unflushed file", "f = open('/tmp/x', 'w')\nf.write('data')\nimport os\nprint(os.path.getsize('/tmp/x'))\n"},
		{"unicode", "print('h\\u00e9llo \\u2603')\nimport sys\nprint(sys.stdout.encoding, sys.getfilesystemencoding(), sys.flags.utf8_mode, sys.flags.dont_write_bytecode)\n"},
		{"warning", "import warnings\nwarnings.warn('careful')\n"},
		{"inspect", "import inspect\ndef f():\n    pass\nprint(inspect.getsource(f), end='')\nimport __main__\nprint(__main__.__file__, __main__.f is f)\n"},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			p := nsjail.Payload{Argv: []string{"python3", "/workspace/end.py"}, Files: []nsjail.File{writeProbe(t, "end.py", e.src)}}
			cold := runCold(t, profile, p)
			sb, _ := startWarm(t, profile, "json")
			warm, err := sb.Exec(context.Background(), p, nsjail.IO{})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if warm.Stderr != cold.Stderr || warm.Stdout != cold.Stdout || warm.ExitCode != cold.ExitCode || warm.Status != cold.Status || signal(warm) != signal(cold) {
				t.Errorf("warm: %s %d %s %q %q\ncold: %s %d %s %q %q", warm.Status, warm.ExitCode, signal(warm), warm.Stdout, warm.Stderr, cold.Status, cold.ExitCode, signal(cold), cold.Stdout, cold.Stderr)
			}
		})
	}
	t.Run("missing script", func(t *testing.T) {
		p := nsjail.Payload{Argv: []string{"python3", "/workspace/nope.py"}}
		cold := runCold(t, profile, p)
		sb, _ := startWarm(t, profile)
		warm, err := sb.Exec(context.Background(), p, nsjail.IO{})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if warm.Stderr != cold.Stderr || warm.ExitCode != cold.ExitCode {
			t.Errorf("warm: %d %q\ncold: %d %q", warm.ExitCode, warm.Stderr, cold.ExitCode, cold.Stderr)
		}
	})
	t.Run("traceback names the script", func(t *testing.T) {
		p := nsjail.Payload{Argv: []string{"python3", "/workspace/tb.py"}, Files: []nsjail.File{writeProbe(t, "tb.py", "def f():\n    raise ValueError('boom')\nf()\n")}}
		sb, _ := startWarm(t, profile)
		warm, err := sb.Exec(context.Background(), p, nsjail.IO{})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		want := "Traceback (most recent call last):\n  File \"/workspace/tb.py\", line 3, in <module>\n    f()\n  File \"/workspace/tb.py\", line 2, in f\n    raise ValueError('boom')\nValueError: boom\n"
		if warm.Stderr != want {
			t.Errorf("warm traceback %q, want %q", warm.Stderr, want)
		}
	})
}

// confinedFields are the /proc/PID/status lines (proc(5)) of a confined
// process: every capability set empty, no_new_privs, a seccomp filter.
var confinedFields = map[string]string{
	"CapInh":     "0000000000000000",
	"CapPrm":     "0000000000000000",
	"CapEff":     "0000000000000000",
	"CapBnd":     "0000000000000000",
	"CapAmb":     "0000000000000000",
	"NoNewPrivs": "1",
	"Seccomp":    "2", // SECCOMP_MODE_FILTER
}

func procFields(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestWarmInterpreterConfined: the interpreter that waits for its payload
// is confined (caps empty, no_new_privs, seccomp), has exactly the rlimits
// a cold payload gets (held at its setsid and limited by the init, like a
// cold payload: seccomp/guard.go), and has already imported its preload.
// As root and as uid 65534.
func TestWarmInterpreterConfined(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		const limitsProbe = "import sys; print(open('/proc/self/limits').read(), end='')"
		cold := runCold(t, "standard", nsjail.Payload{Argv: []string{"python3", "-c", limitsProbe}})
		if cold.Status != nsjail.StatusOK {
			t.Fatalf("cold: %s %q %q", cold.Status, cold.Message, cold.Stderr)
		}
		sb, pid := startWarm(t, "standard", "json", "email.mime.text")
		// The wait a warm sandbox makes: nothing may loosen meanwhile.
		time.Sleep(time.Second)
		st := procFields(t, fmt.Sprintf("/proc/%d/status", pid))
		for k, want := range confinedFields {
			if st[k] != want {
				t.Errorf("waiting interpreter (pid %d): %s %q, want %q", pid, k, st[k], want)
			}
		}
		// In the sandbox's cgroup, as the init is (on cgroup v1 the init
		// is attached after its clone: the interpreter must not be forked
		// before).
		initCg, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sb.InitPid()))
		interpCg, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err1 != nil || err2 != nil || string(initCg) != string(interpCg) {
			t.Errorf("the interpreter's cgroups:\n%s\nthe init's:\n%s (%v, %v)", interpCg, initCg, err1, err2)
		}
		lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		if err != nil {
			t.Fatal(err)
		}
		// RLIMIT_CPU is the one the warm sandbox widens (the preload's
		// budget, warmCPUBudget); every other line is the cold payload's.
		if got, want := dropLine(string(lim), "Max cpu time"), dropLine(cold.Stdout, "Max cpu time"); got != want {
			t.Errorf("waiting interpreter's limits:\n%s\ncold payload's:\n%s", got, want)
		}
		const cpuProbe = "import resource; print(*resource.getrlimit(resource.RLIMIT_CPU))"
		coldCPU := runCold(t, "standard", nsjail.Payload{Argv: []string{"python3", "-c", cpuProbe}})
		res, err := sb.Exec(context.Background(), nsjail.Payload{Argv: []string{"python3", "-c",
			"import sys; print(sorted(m for m in ('json', 'email.mime.text', 'csv') if m in sys.modules))\n" + cpuProbe}}, nsjail.IO{})
		if err != nil {
			t.Fatal(err)
		}
		mods, cpu, _ := strings.Cut(res.Stdout, "\n")
		if res.Status != nsjail.StatusOK || mods != "['email.mime.text', 'json']" {
			t.Errorf("preloaded modules: %s %q %q, want ['email.mime.text', 'json']", res.Status, res.Stdout, res.Stderr)
		}
		// After the handoff the RLIMIT_CPU backstop is re-based: the cold
		// payload's, plus the preload's CPU rounded up to seconds.
		var ws, wh, cs, ch int
		fmt.Sscan(cpu, &ws, &wh)
		fmt.Sscan(coldCPU.Stdout, &cs, &ch)
		if cs == 0 || ws < cs || ws > cs+2 || wh-ws != ch-cs {
			t.Errorf("RLIMIT_CPU after the handoff %d/%d, a cold payload's %d/%d: want the cold one plus at most 2 s", ws, wh, cs, ch)
		}
	})
}

func dropLine(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWarmOther: a payload that is not for the waiting interpreter (a
// shell, an interpreter option, an environment the interpreter reads at
// its start) runs cold in the same sandbox, with its own limits and
// result; a preload that fails is a setup error naming the module.
func TestWarmOther(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		for _, p := range []nsjail.Payload{
			{Argv: []string{"/bin/sh", "-c", "echo hi; exit 3"}},
			{Argv: []string{"python3", "-S", "-c", "print('hi'); raise SystemExit(3)"}},
			{Argv: []string{"python3", "-c", "import os; print('hi'); raise SystemExit(int(os.environ['PYTHONX']))"}, Env: []string{"PYTHONX=3"}},
		} {
			sb, _ := startWarm(t, "standard", "json")
			res, err := sb.Exec(context.Background(), p, nsjail.IO{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != nsjail.StatusExit || res.ExitCode != 3 || res.Stdout != "hi\n" {
				t.Errorf("%q: %s %d %q %q %q, want exit 3 and hi", p.Argv, res.Status, res.ExitCode, res.Stdout, res.Stderr, res.Message)
			}
		}
		_, err := nsjail.Start(context.Background(), job(t, "standard", true, "no_such_module_sbx"))
		if err == nil || !strings.Contains(err.Error(), "no_such_module_sbx") {
			t.Errorf("a failing preload: Start said %v, want an error naming the module", err)
		}
	})
}

// TestWarmLowered: limits a payload lowers are applied when it is
// handed over (the rlimits by prlimit on the waiting interpreter, the
// wall clock by the supervisor), enforced, and reported as the effective
// values; a value above the sandbox's is not raised.
func TestWarmLowered(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		sb, _ := startWarm(t, "standard")
		res, err := sb.Exec(context.Background(), nsjail.Payload{
			Argv: []string{"python3", "-c", "import resource, time; print(resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_FSIZE)); time.sleep(60)"},
			Lower: &nsjail.Lower{Timeout: 2 * time.Second, Rlimits: []nsjail.Rlimit{
				{Resource: "RLIMIT_NOFILE", Soft: 64, Hard: 64},
				{Resource: "RLIMIT_FSIZE", Soft: 1 << 40, Hard: 1 << 40}, // above the sandbox's: kept
			}},
		}, nsjail.IO{})
		if err != nil {
			t.Fatal(err)
		}
		fsize := uint64(res.Limits["fsize"].Value)
		if want := fmt.Sprintf("(64, 64) (%d, %d)\n", fsize, fsize); res.Stdout != want {
			t.Errorf("rlimits seen: %q, want %q", res.Stdout, want)
		}
		if fsize >= 1<<40 || fsize == 0 {
			t.Errorf("limits.fsize %v: the sandbox's, never raised", fsize)
		}
		if res.Status != nsjail.StatusTimeout || res.Limits["wall_time"].Value != 2000 || res.Limits["nofile"].Value != 64 {
			t.Errorf("status %s, limits wall_time %v nofile %v; want timeout, 2000, 64", res.Status, res.Limits["wall_time"].Value, res.Limits["nofile"].Value)
		}
	})
}

// TestWarmUsageFromHandoff: CPU time counts from the handoff, not from
// the interpreter's start: after a preload that burns a second of CPU, a
// payload's cpu_ms is its own, and so is its CPU limit (lowered to 2 s,
// which the preload's second plus the payload's 1.2 s would pass). With a
// cgroup (root) and without (uid 65534: the /proc total and task clock).
func TestWarmUsageFromHandoff(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		// The sandbox's user (an unprivileged host uid under root) reads
		// it: not below t.TempDir's 0700 parent.
		dir, err := os.MkdirTemp("", "sbx-warmburn-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		burn := "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\n"
		if err := os.WriteFile(filepath.Join(dir, "sbxwarmburn.py"), []byte(burn), 0o644); err != nil {
			t.Fatal(err)
		}
		prof, err := profiles.Load("standard")
		if err != nil {
			t.Fatal(err)
		}
		prof.Filesystem.ROBinds = []string{dir + ":/opt/sbxwarm"}
		spec, err := prof.Spec(fmt.Sprintf("pool%d", time.Now().UnixNano()), nil)
		if err != nil {
			t.Fatal(err)
		}
		spec.Env = append(spec.Env, "PYTHONPATH=/opt/sbxwarm", "PYTHONDONTWRITEBYTECODE=1")
		spec.Warm = &nsjail.Warm{Interpreter: "python3", Preload: []string{"sbxwarmburn"}}
		start := func() *nsjail.Sandbox {
			j := job(t, "standard", false)
			j.Spec = spec
			j.Spec.ID = fmt.Sprintf("pool%d", time.Now().UnixNano())
			sb, err := nsjail.Start(context.Background(), j)
			if err != nil {
				skipIfNoSandbox(t, err)
			}
			t.Cleanup(func() { sb.Close() })
			return sb
		}
		res, err := start().Exec(context.Background(), nsjail.Payload{Argv: []string{"python3", "-c", "print(1)"}}, nsjail.IO{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != nsjail.StatusOK || res.Stdout != "1\n" {
			t.Fatalf("print(1): %s %q %q %q", res.Status, res.Stdout, res.Stderr, res.Message)
		}
		if res.Usage.CPUMS >= 600 {
			t.Errorf("usage %+v: the preload's second of CPU is not the payload's", res.Usage)
		}
		const work = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\nprint('done')\n"
		res, err = start().Exec(context.Background(), nsjail.Payload{Argv: []string{"python3", "-c", work}, Lower: &nsjail.Lower{CPUTime: 2 * time.Second}}, nsjail.IO{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != nsjail.StatusOK || res.Stdout != "done\n" || res.Limits["cpu_time"].Value != 2000 {
			t.Errorf("1.2 s of CPU under a 2 s limit: %s %q %q, limits.cpu_time %+v; usage %+v", res.Status, res.Stdout, res.Message, res.Limits["cpu_time"], res.Usage)
		}
		if res.Usage.CPUMS < 1100 || res.Usage.CPUMS > 1900 {
			t.Errorf("cpu_ms %d: want the payload's 1.2 s", res.Usage.CPUMS)
		}
	})
}

// TestWarmDataPreload: the data profile's preload (numpy, pandas,
// matplotlib with Agg) is imported ahead, and what it wrote (matplotlib's
// font cache below /tmp) is gone before the payload: its /tmp and
// workspace are as a cold run's, and it has fds 0-2 only.
func TestWarmDataPreload(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		prof, err := profiles.Load("data")
		if err != nil {
			t.Fatal(err)
		}
		if len(prof.Preload) == 0 {
			t.Fatal("data has no preload")
		}
		sb, _ := startWarm(t, "data", prof.Preload...)
		src := `import os, sys
print(all(m in sys.modules for m in ("numpy", "pandas", "matplotlib.pyplot")))
import matplotlib
print(matplotlib.get_backend())
print(sorted(os.listdir("/tmp")), sorted(os.listdir(".")), sorted(os.listdir("/dev/shm")), len(os.listdir("/proc/self/fd")))
import pandas as pd
print(pd.DataFrame({"k": [1, 1, 2], "v": [1, 2, 3]}).groupby("k").v.sum().to_dict())
`
		res, err := sb.Exec(context.Background(), nsjail.Payload{Argv: []string{"python3", "-c", src}}, nsjail.IO{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "True\nagg\n[] [] [] 4\n{1: 3, 2: 3}\n"; res.Status != nsjail.StatusOK || res.Stdout != want {
			t.Errorf("%s %q (stderr %q, %q), want %q", res.Status, res.Stdout, res.Stderr, res.Message, want)
		}
	})
}

func signal(r *nsjail.Result) string {
	if r.Signal == nil {
		return "-"
	}
	return fmt.Sprint(*r.Signal)
}

// TestWarmStdin: a warm sandbox started with a stdin pipe (Job.Stdin)
// gives the payload its request's stdin, which the waiting interpreter
// has not touched.
func TestWarmStdin(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		j := job(t, "standard", true, "json")
		j.Stdin = strings.NewReader("") // only says: a pipe
		sb, err := nsjail.Start(context.Background(), j)
		if err != nil {
			skipIfNoSandbox(t, err)
		}
		defer sb.Close()
		res, err := sb.Exec(context.Background(), nsjail.Payload{Argv: []string{"python3", "-c", "import sys; print(sys.stdin.read().upper(), end='')"}},
			nsjail.IO{Stdin: strings.NewReader("request data\n")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != nsjail.StatusOK || res.Stdout != "REQUEST DATA\n" {
			t.Errorf("%s %q %q", res.Status, res.Stdout, res.Stderr)
		}
	})
}
