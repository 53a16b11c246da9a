//go:build integration

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// project makes a world-readable directory below dataDir with the given
// files (relative path -> content).
func project(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(dataDir, name)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunMyProject: `sbx exec --input-dir . main.py` runs the project's
// main.py from its place, next to its modules; a path relative to the
// dir names the script too (issue 19, point 9).
func TestRunMyProject(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir := project(t, "proj-"+r.name, map[string]string{
			"main.py":     "import helper\nprint(helper.X)\n",
			"helper.py":   "X = 'helped'\n",
			"sub/run.py":  "import near\nprint(near.Y)\n",
			"sub/near.py": "Y = 'near'\n",
			"data/in.txt": "x",
		})
		for _, tc := range []struct{ name, cwd, script, want string }{
			{"dot and main.py", dir, "main.py", "helped\n"},
			{"dir and its main.py", dataDir, filepath.Join(dir, "main.py"), "helped\n"},
			{"path relative to the dir", dataDir, "sub/run.py", "near\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := dir
				if tc.cwd == dir {
					in = "."
				}
				cmd := r.command("exec", "--input-dir", in, tc.script)
				cmd.Dir = tc.cwd
				var so, se strings.Builder
				cmd.Stdout, cmd.Stderr = &so, &se
				err := cmd.Run()
				if err != nil || so.String() != tc.want {
					t.Errorf("sbx exec --input-dir %s %s (in %s): %v, stdout %q, stderr %q, want %q", in, tc.script, tc.cwd, err, so.String(), se.String(), tc.want)
				}
			})
		}
	})
}

// TestEmptyInputDir: an empty --input-dir is an empty workspace, not an
// error (issue 19, point 10).
func TestEmptyInputDir(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir := project(t, "empty-"+r.name, nil)
		out := r.exec(t, "", "exec", "--input-dir", dir, "-c", "import os; print(os.listdir('.'))")
		if out.code != 0 || out.stdout != "[]\n" {
			t.Errorf("empty --input-dir: exit %d stdout %q stderr %q, want [] and 0", out.code, out.stdout, out.stderr)
		}
	})
}

var _ = nsjail.StatusOK

// TestCodeOnStdin: `sbx exec -` and `sbx exec /dev/stdin` read the script
// from a pipe (the payload's stdin is then empty); code past what execve
// takes is refused on the host, pointing to `-` (issue 19, point 11).
func TestCodeOnStdin(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, arg := range []string{"-", "/dev/stdin"} {
			out := r.exec(t, "import sys\nprint('from stdin', sys.argv[1:], repr(sys.stdin.read()))\n", "exec", arg, "a1")
			if want := "from stdin ['a1'] ''\n"; out.code != 0 || out.stdout != want {
				t.Errorf("sbx exec %s a1 < code: exit %d stdout %q stderr %q, want %q", arg, out.code, out.stdout, out.stderr, want)
			}
		}
		// One environment string past MAX_ARG_STRLEN (128 KiB): the
		// shell would refuse it on sbx's own command line, but a profile
		// file can bring it.
		prof := filepath.Join(dataDir, "bigenv-"+r.name+".toml")
		os.WriteFile(prof, []byte("[env]\nBIG = \""+strings.Repeat("x", 200<<10)+"\"\n"), 0o644)
		defer os.Remove(prof)
		out := r.exec(t, "", "exec", "--profile", prof, "-c", "pass")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "environment variable BIG") || !strings.Contains(out.stderr, "MAX_ARG_STRLEN") {
			t.Errorf("a 200 KiB env string: exit %d stderr %q, want 125 naming BIG and MAX_ARG_STRLEN", out.code, out.stderr)
		}
		// -c CODE with the environment past a quarter of a 1 MiB stack:
		// refused on the host, saying to give the code on stdin.
		os.WriteFile(prof, []byte("[env]\nMID1 = \""+strings.Repeat("x", 70<<10)+"\"\nMID2 = \""+strings.Repeat("x", 70<<10)+"\"\n"), 0o644)
		cmd := r.command("exec", "--profile", prof, "-c", "#"+strings.Repeat("x", 120<<10))
		cmd.Args = append([]string{"prlimit", "--stack=1048576", "--"}, cmd.Args...)
		cmd.Path = "/usr/bin/prlimit"
		var se strings.Builder
		cmd.Stderr = &se
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != nsjail.ExitSbxFailed || !strings.Contains(se.String(), "sbx exec - < code.py") {
			t.Errorf("-c of 120 KiB under a 1 MiB stack: %v exit %d stderr %q, want 125 saying to use sbx exec -", err, code, se.String())
		}
	})
}

// TestShebangScripts: a script whose #! line names another interpreter of
// the sandbox's root runs with it; a .sh or .js without one is warned
// about rather than left to a bare SyntaxError (issue 19, point 12).
func TestShebangScripts(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir := project(t, "shebang-"+r.name, map[string]string{
			"b.sh":     "#!/bin/bash\necho \"bash ${BASH_VERSINFO[0]} $1\"\n",
			"s.sh":     "#!/bin/sh -e\necho \"sh $1\"\n",
			"p":        "#!/usr/bin/env python3\nimport sys; print('py', sys.argv[1])\n",
			"plain.sh": "echo hi\n",
			"plain.js": "console.log(1)\n",
			"gone.sh":  "#!/no/such/shell\necho hi\n",
		})
		for name, want := range map[string]string{"b.sh": "bash 5 x\n", "s.sh": "sh x\n", "p": "py x\n"} {
			res, out := r.result(t, filepath.Join(dir, name), "x")
			if res.Status != nsjail.StatusOK || res.Stdout != want {
				t.Errorf("%s: status %s stdout %q stderr %q (sbx: %s), want %q", name, res.Status, res.Stdout, res.Stderr, out.stderr, want)
			}
		}
		for _, name := range []string{"plain.sh", "plain.js"} {
			res, _ := r.result(t, filepath.Join(dir, name))
			if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), name+" has no #! line") {
				t.Errorf("%s: warnings %q, want one saying it has no #! line", name, res.Warnings)
			}
			out := r.exec(t, "", "exec", filepath.Join(dir, name))
			if !strings.Contains(out.stderr, "sbx: warning: script "+name) {
				t.Errorf("%s in terminal mode: stderr %q, want the warning line", name, out.stderr)
			}
		}
		out := r.exec(t, "", "exec", filepath.Join(dir, "gone.sh"))
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "/no/such/shell") {
			t.Errorf("gone.sh: exit %d stderr %q, want 125 naming the missing interpreter", out.code, out.stderr)
		}
	})
}

// TestOutputProblemsSaid: a re-run into a non-empty --output-dir is
// refused unless --overwrite-output; a file that could not be copied (a
// symlink in its way) and a file the run deleted whose older copy stays
// are warned about, in the Result and on the terminal (issue 19, point 13).
func TestOutputProblemsSaid(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		os.WriteFile(filepath.Join(c.out, "earlier.txt"), []byte("old"), 0o644)
		out := r.exec(t, "", "exec", "--output-dir", c.out, "-c", "open('new.txt','w').write('x')")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "is not empty") || !strings.Contains(out.stderr, "--overwrite-output") {
			t.Errorf("non-empty --output-dir: exit %d stderr %q, want 125 naming --overwrite-output", out.code, out.stderr)
		}
		if _, err := os.Stat(filepath.Join(c.out, "new.txt")); err == nil {
			t.Errorf("refused run wrote new.txt")
		}
		// A symlink where a directory of the run goes, and the older copy
		// of an input the run deletes.
		elsewhere := filepath.Join(c.root, "elsewhere")
		os.Mkdir(elsewhere, 0o777)
		os.Chmod(elsewhere, 0o777)
		os.Symlink(elsewhere, filepath.Join(c.out, "sub"))
		os.WriteFile(filepath.Join(c.out, "gone.txt"), []byte("old"), 0o644)
		in := project(t, "outin-"+r.name, map[string]string{"gone.txt": "in"})
		code := "import os; os.makedirs('sub', exist_ok=True); open('sub/a.txt','w').write('a'); open('ok.txt','w').write('ok'); os.remove('gone.txt')"
		args := []string{"--overwrite-output", "--output-dir", c.out, "--input-dir", in, "-c", code}
		res, _ := r.result(t, args...)
		ws := strings.Join(res.Warnings, "\n")
		if res.Status != nsjail.StatusOK || !strings.Contains(ws, "sub/a.txt not copied") || !strings.Contains(ws, "gone.txt was deleted by the run") {
			t.Errorf("status %s, warnings %q, want sub/a.txt not copied and gone.txt deleted", res.Status, res.Warnings)
		}
		if b, err := os.ReadFile(filepath.Join(c.out, "ok.txt")); err != nil || string(b) != "ok" {
			t.Errorf("ok.txt: %q %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(elsewhere, "a.txt")); err == nil {
			t.Errorf("the copy went through the symlink")
		}
		term := r.exec(t, "", append([]string{"exec"}, args...)...)
		if !strings.Contains(term.stderr, "sbx: warning: --output-dir: sub/a.txt not copied") {
			t.Errorf("terminal mode: stderr %q, want the not-copied warning line", term.stderr)
		}
	})
}

// TestBeyondTheHost: --cpus above the host's CPUs is clamped with a
// warning; a --timeout above 24h is refused, naming the flag (issue 19,
// point 15).
func TestBeyondTheHost(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		host := runtime.NumCPU()
		res, out := r.result(t, "--cpus", "100", "-c", "pass")
		want := fmt.Sprintf(`--cpus "100": this host gives sbx %d CPUs; clamped to %d`, host, host)
		if res.Status != nsjail.StatusOK || !strings.Contains(strings.Join(res.Warnings, "\n"), want) {
			t.Errorf("--cpus 100: status %s warnings %q (sbx: %s), want ok and %q", res.Status, res.Warnings, out.stderr, want)
		}
		if term := r.exec(t, "", "exec", "--cpus", "100", "-c", "pass"); !strings.Contains(term.stderr, "sbx: warning: "+want) {
			t.Errorf("--cpus 100 in terminal mode: stderr %q", term.stderr)
		}
		// The limit the Result reports is the one applied.
		if v, ok := res.Limits["cpus"]; ok && v.Value != float64(host) {
			t.Errorf("limits.cpus %v, want %d", v.Value, host)
		}
		term := r.exec(t, "", "exec", "--timeout", "999999h", "-c", "pass")
		if term.code != nsjail.ExitSbxFailed || !strings.Contains(term.stderr, `--timeout "999999h"`) || !strings.Contains(term.stderr, "24h") {
			t.Errorf("--timeout 999999h: exit %d stderr %q, want 125 naming --timeout and 24h", term.code, term.stderr)
		}
	})
}

// TestROBindFlag: --ro-bind SRC[:DEST] binds a host directory read-only,
// at its own path or at DEST; binds on the sandbox's own paths are
// refused with the reason (issue 19, point 16).
func TestROBindFlag(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		src := project(t, "models-"+r.name, map[string]string{"weights.txt": "w"})
		code := "import sys, os\np = sys.argv[1]\nprint(open(os.path.join(p, 'weights.txt')).read())\ntry:\n    open(os.path.join(p, 'new'), 'w')\nexcept OSError as e:\n    print(e.errno)\n"
		for _, tc := range []struct{ flag, inside string }{{src + ":/data", "/data"}, {src + ":/mnt/models", "/mnt/models"}} {
			res, out := r.result(t, "--ro-bind", tc.flag, "-c", code, tc.inside)
			if res.Status != nsjail.StatusOK || res.Stdout != "w\n30\n" {
				t.Errorf("--ro-bind %s: status %s (%s) stdout %q stderr %q sbx %q, want the file read and EROFS (30) on write", tc.flag, res.Status, res.Message, res.Stdout, res.Stderr, out.stderr)
			}
		}
		// The test data lives below /tmp: bound at its own path, it is
		// refused too.
		if out := r.exec(t, "", "exec", "--ro-bind", src, "-c", "pass"); out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "/tmp is the sandbox's own") {
			t.Errorf("--ro-bind %s: exit %d stderr %q", src, out.code, out.stderr)
		}
		for dst, want := range map[string]string{
			"/tmp/x":        "/tmp is the sandbox's own: sbx mounts a fresh tmpfs there",
			"/proc/x":       "/proc is the sandbox's own",
			"/dev/x":        "/dev is the sandbox's own",
			"/workspace/in": "overlaps the workspace /workspace, a fresh tmpfs mounted over it",
			"/usr/x":        "/usr is the sandbox's root",
		} {
			out := r.exec(t, "", "exec", "--ro-bind", src+":"+dst, "-c", "pass")
			if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "--ro-bind") && !strings.Contains(out.stderr, "read-only bind") || !strings.Contains(out.stderr, want) {
				t.Errorf("--ro-bind %s:%s: exit %d stderr %q, want 125 and %q", src, dst, out.code, out.stderr, want)
			}
		}
	})
}

// TestDoctorFixFitsTheHost: doctor's cgroup fix is one for the host's
// hierarchy: on a v1 or hybrid host, not systemd's user delegation or
// cgroup.subtree_control, which exist on v2 only (issue 19, point 17).
func TestDoctorFixFitsTheHost(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var rep struct {
			Checks []struct{ Name, Status, Fix string } `json:"checks"`
		}
		out := r.exec(t, "", "doctor", "--json")
		if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, out.stdout)
		}
		v2 := hostCgroupMode(t) == "cgroup2"
		for _, c := range rep.Checks {
			if c.Name != "cgroup" || c.Fix == "" {
				continue
			}
			if !v2 && (strings.Contains(c.Fix, "systemd-run --user") || strings.Contains(c.Fix, "subtree_control")) {
				t.Errorf("cgroup v1 host, fix %q is cgroup v2's", c.Fix)
			}
			if v2 && strings.Contains(c.Fix, "cgroup v1") {
				t.Errorf("cgroup v2 host, fix %q is cgroup v1's", c.Fix)
			}
		}
	})
}

// TestMakeInstall: make install puts the binary, the man page and the
// bash, zsh and fish completions below DESTDIR/PREFIX; the installed sbx
// has no gen-docs (issue 19, point 18). A build test: it runs once, as
// the caller.
func TestMakeInstall(t *testing.T) {
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "root")
	cmd := exec.Command("make", "-C", repoDir, "--no-print-directory", "install", "DESTDIR="+dest, "PREFIX=/usr",
		"OUT="+filepath.Join(tmp, "sbx"), "DOCDIR="+filepath.Join(tmp, "docs"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, p := range []string{"bin/sbx", "share/man/man1/sbx.1", "share/bash-completion/completions/sbx",
		"share/zsh/site-functions/_sbx", "share/fish/vendor_completions.d/sbx.fish"} {
		if fi, err := os.Stat(filepath.Join(dest, "usr", p)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	out, _ := exec.Command(filepath.Join(dest, "usr/bin/sbx"), "gen-docs", tmp).CombinedOutput()
	if !strings.Contains(string(out), `unknown command "gen-docs"`) {
		t.Errorf("installed sbx gen-docs: %q, want unknown command", out)
	}
}
