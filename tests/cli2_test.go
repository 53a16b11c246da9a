//go:build integration

package tests

import (
	"os"
	"path/filepath"
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
