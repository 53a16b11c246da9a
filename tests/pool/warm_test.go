//go:build integration

// Package pool tests warm sandboxes (nsjail.Spec.Warm) and the pool of
// them (package pool) as Go handles. The test binary hosts the init
// (STYLE.md, practice 12), as tests/handle does.
package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

func TestMain(m *testing.M) {
	if nsjail.IsInit() {
		nsjail.Init()
	}
	os.Exit(m.Run())
}

// nobody is the unprivileged uid of the rootless runs.
const nobody = 65534

// asChild marks the copy of this test binary that runs a scenario as
// nobody, started by the root run through setpriv.
const asChild = "SBX_POOL_TEST_CHILD"

// bothUsers runs scenario as root and, through a world-readable copy of
// this test binary started by setpriv, as uid 65534 (or only as the
// current user when that is not root).
func bothUsers(t *testing.T, scenario func(t *testing.T)) {
	name := t.Name()
	if os.Getenv(asChild) == "1" || os.Geteuid() != 0 {
		t.Run(fmt.Sprintf("uid%d", os.Geteuid()), scenario)
		return
	}
	t.Run("root", scenario)
	t.Run("uid65534", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "sbx-pool-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "pool.test")
		if err := copyFile(bin, os.Args[0]); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups",
			bin, "-test.run", "^"+name+"$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), asChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("as uid %d:\n%s", nobody, out)
		if err != nil {
			t.Fatalf("the scenario failed as uid %d: %v", nobody, err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("skipped as uid %d", nobody)
		}
		if !strings.Contains(string(out), "--- PASS: "+name+"/uid65534") {
			t.Fatalf("the scenario did not pass as uid %d", nobody)
		}
	})
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// job is the named profile's run, as sbx exec builds it; warm adds the
// interpreter started ahead with preload.
func job(t *testing.T, profile string, warm bool, preload ...string) *nsjail.Job {
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
	bothUsers(t, func(t *testing.T) {
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
	t.Run("traceback", func(t *testing.T) {
		src := "import sys\ndef f():\n    raise ValueError('boom')\nprint('before')\nf()\n"
		p := nsjail.Payload{Argv: []string{"python3", "/workspace/tb.py"}, Files: []nsjail.File{writeProbe(t, "tb.py", src)}}
		cold := runCold(t, profile, p)
		sb, _ := startWarm(t, profile)
		warm, err := sb.Exec(context.Background(), p, nsjail.IO{})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if warm.Stderr != cold.Stderr || warm.Stdout != cold.Stdout || warm.ExitCode != cold.ExitCode || warm.Status != cold.Status {
			t.Errorf("warm: %s %d %q %q\ncold: %s %d %q %q", warm.Status, warm.ExitCode, warm.Stdout, warm.Stderr, cold.Status, cold.ExitCode, cold.Stdout, cold.Stderr)
		}
		if !strings.Contains(warm.Stderr, `File "/workspace/tb.py", line 5, in <module>`) {
			t.Errorf("warm traceback %q does not name /workspace/tb.py", warm.Stderr)
		}
	})
}
