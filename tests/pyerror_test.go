//go:build integration

package tests

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// A Python payload's uncaught exception is the Result's error: captured
// in-process by the runner that starts the script, with the script's own
// frames; stderr still shows the traceback. A payload that did not die of
// one has none, whatever it wrote.
func TestExecPythonError(t *testing.T) {
	// Not t.TempDir: its parent is root's, mode 0700.
	dir, err := os.MkdirTemp("", "sbx-pyerror-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	script := filepath.Join(dir, "raise.py")
	os.WriteFile(script, []byte("import json\n\ndef load(s):\n    return json.loads(s)\n\nload('{bad')\n"), 0o644)
	forEach(t, func(t *testing.T, r runner) {
		res, _ := r.result(t, script)
		e := res.Error
		if res.ExitCode != 1 || e == nil || e.Name != "JSONDecodeError" || !strings.Contains(e.Value, "line 1 column 2") {
			t.Fatalf("a script that raises: exit %d, error %+v", res.ExitCode, e)
		}
		if f := e.Traceback; len(f) < 3 || f[0].File != "/workspace/raise.py" || f[0].Line != 6 || f[0].Code != "load('{bad')" || f[1].Function != "load" || f[1].Code != "return json.loads(s)" {
			t.Errorf("frames: %+v, want the script's (line 6, then load) down into json", e.Traceback)
		}
		if !strings.Contains(res.Stderr, "Traceback (most recent call last):") || !strings.Contains(res.Stderr, "json.decoder.JSONDecodeError") {
			t.Errorf("stderr lost the traceback: %q", res.Stderr)
		}
		if res, _ := r.result(t, "-c", "x = ("); res.Error == nil || res.Error.Name != "SyntaxError" || res.Error.Traceback[0].Code != "x = (" {
			t.Errorf("a SyntaxError: %+v", res.Error)
		}
		for _, args := range [][]string{
			{"-c", "import sys; print('Traceback (most recent call last):', file=sys.stderr); sys.exit(1)"},
			{"-c", "print(1)"},
			{"--", "/bin/sh", "-c", "echo 'ZeroDivisionError: x' >&2; exit 1"},
			// A payload that sends a report of its own and exits 0.
			{"-c", "import socket, glob\nfor a in open('/proc/net/unix').read().split():\n    if a.startswith('@sbx-report-'):\n        s = socket.socket(socket.AF_UNIX); s.connect('\\0' + a[1:]); s.sendall(b'Forged\\0v'); s.close()\nprint('sent')"},
		} {
			if res, _ := r.result(t, args...); res.Error != nil {
				t.Errorf("%v: error %+v, want none", args, res.Error)
			}
		}
		// The same over HTTP.
		s := startServe(t, r, "")
		resp := s.do("POST", "/v1/exec", map[string]any{"code": "1/0"})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var sr struct {
			Error *nsjail.PyError `json:"error"`
		}
		json.Unmarshal(b, &sr)
		if sr.Error == nil || sr.Error.Name != "ZeroDivisionError" || sr.Error.Traceback[0].File != "/workspace/main.py" || sr.Error.Traceback[0].Code != "1/0" {
			t.Errorf("POST /v1/exec 1/0: %s", b)
		}
	})
}

// TestPythonRunnerRlimits: a cold Python payload, which starts through the
// runner (the warm driver without a preload), gets the RLIMIT_CPU backstop
// any other cold payload gets. The re-base at a warm handoff takes the
// preload's budget (warmCPUBudget) back out; a cold runner was never
// given it, so taking it out would leave the payload 30 s short.
func TestPythonRunnerRlimits(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		py, _ := r.result(t, "-c", "import resource; print(*resource.getrlimit(resource.RLIMIT_CPU))")
		sh, _ := r.result(t, "--", "/bin/sh", "-c", "echo $(ulimit -St) $(ulimit -Ht)")
		if py.Status != nsjail.StatusOK || sh.Status != nsjail.StatusOK || py.Stdout == "" || py.Stdout != sh.Stdout {
			t.Errorf("RLIMIT_CPU soft/hard of a cold python3 -c %q (%s), of /bin/sh %q (%s): want the same", py.Stdout, py.Status, sh.Stdout, sh.Status)
		}
	})
}
