//go:build integration

package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// The acceptance of issue 15, over a real `sbx serve`, as root and as uid
// 65534.

// newSession posts body to /v1/sessions and returns the session's id.
func (s *server) newSession(body map[string]any) string {
	s.t.Helper()
	resp := s.do("POST", "/v1/sessions", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		s.t.Fatalf("POST /v1/sessions %v: %s: %s\nserver:\n%s", body, resp.Status, b, s.stderr)
	}
	if resp.Header.Get("X-Sbx-Session-Route") == "" {
		s.t.Errorf("POST /v1/sessions: no X-Sbx-Session-Route header")
	}
	var r struct {
		ID        string    `json:"id"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" || r.ExpiresAt.IsZero() {
		s.t.Fatalf("POST /v1/sessions: %s (%v)", b, err)
	}
	if !strings.HasPrefix(r.ID, resp.Header.Get("X-Sbx-Session-Route")) {
		s.t.Errorf("session id %s does not start with its route %s", r.ID, resp.Header.Get("X-Sbx-Session-Route"))
	}
	s.t.Cleanup(func() {
		if resp, err := http.DefaultClient.Do(mustRequest("DELETE", s.base+"/v1/sessions/"+r.ID)); err == nil {
			resp.Body.Close()
		}
	})
	return r.ID
}

func mustRequest(method, url string) *http.Request {
	req, _ := http.NewRequest(method, url, nil)
	return req
}

// cell runs code in session id and decodes the Execution, strictly.
func (s *server) cell(id, code string, extra ...any) *nsjail.Execution {
	s.t.Helper()
	body := map[string]any{"code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	resp := s.do("POST", "/v1/sessions/"+id+"/exec", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		s.t.Fatalf("exec %q: %s: %s\nserver:\n%s", code, resp.Status, b, s.stderr)
	}
	var ex nsjail.Execution
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ex); err != nil {
		s.t.Fatalf("bad Execution (%v): %.2000s", err, b)
	}
	return &ex
}

// mainText is the text of the execution's main result, or "".
func mainText(ex *nsjail.Execution) string {
	for _, r := range ex.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

func TestSessionState(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{"profile": "standard", "ttl": "10m"})

		if ex := s.cell(id, "x = 41"); ex.Status != nsjail.ExecOK || ex.ExecutionCount != 1 || len(ex.Results) != 0 {
			t.Errorf("x = 41: %+v", ex)
		}
		ex := s.cell(id, "x + 1")
		if mainText(ex) != "42" || ex.ExecutionCount != 2 || ex.Status != nsjail.ExecOK {
			t.Errorf("x + 1: main result %q, execution_count %d, status %s; want 42, 2, ok (%+v)", mainText(ex), ex.ExecutionCount, ex.Status, ex)
		}

		ex = s.cell(id, "def f():\n    return 1/0\nf()")
		if ex.Status != nsjail.ExecError || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" {
			t.Fatalf("1/0: %+v", ex)
		}
		tb := ex.Error.Traceback
		if len(tb) != 2 || tb[0].File != "<cell-3>" || tb[0].Line != 3 || tb[0].Code != "f()" || tb[1].Function != "f" || tb[1].Code != "return 1/0" {
			t.Errorf("1/0's frames: %+v, want <cell-3>:3 f() then f: return 1/0 (the driver's left out)", tb)
		}
		if got := mainText(s.cell(id, "x")); got != "41" {
			t.Errorf("x after the error: %q, want 41", got)
		}

		start := time.Now()
		ex = s.cell(id, "while True: pass", "timeout", "1s")
		if ex.Status != nsjail.ExecTimeout || ex.StateLost || ex.Error == nil || ex.Error.Name != "KeyboardInterrupt" {
			t.Errorf("while True with timeout 1s: %+v", ex)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the timed-out cell took %v", d)
		}
		if ex := s.cell(id, "x"); mainText(ex) != "41" || ex.StateLost {
			t.Errorf("x after the interrupt: %+v, want 41 with the state kept", ex)
		}

		// display(), stdout and stderr in order, env for one cell.
		ex = s.cell(id, "import os, sys\nprint('a')\nsys.stderr.write('b\\n')\ndisplay(7)\nos.environ['ONLY']", "env", map[string]string{"ONLY": "here"})
		if ex.Stdout != "a\n" || ex.Stderr != "b\n" || len(ex.Results) != 2 || ex.Results[0].Text != "7" || ex.Results[0].IsMainResult || mainText(ex) != "'here'" {
			t.Errorf("print, stderr, display, env: %+v", ex)
		}
		if len(ex.Logs) != 2 || ex.Logs[0].Stream != "stdout" || ex.Logs[1].Stream != "stderr" {
			t.Errorf("logs: %+v, want stdout then stderr", ex.Logs)
		}
		if ex := s.cell(id, "import os; os.environ.get('ONLY')"); len(ex.Results) != 0 {
			t.Errorf("a cell's env outlived it: %+v", ex.Results)
		}

		// Streamed: stdout as it comes, then the result and the end.
		resp := s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": "import time\nprint('one', flush=True)\ndisplay('shown')\ntime.sleep(2)\nx * 2"}, "Accept", "application/x-ndjson")
		defer resp.Body.Close()
		var types []string
		var resultAt []int64
		var end *nsjail.Execution
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct {
				Type      string             `json:"type"`
				TMS       int64              `json:"t_ms"`
				Data      string             `json:"data"`
				Result    *nsjail.MIMEBundle `json:"result"`
				Execution *nsjail.Execution  `json:"execution"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("stream line %q: %v", sc.Text(), err)
			}
			if ev.Type != "keepalive" {
				types = append(types, ev.Type)
			}
			if ev.Type == "result" {
				resultAt = append(resultAt, ev.TMS)
			}
			if ev.Type == "end" {
				end = ev.Execution
			}
		}
		if strings.Join(types, ",") != "stdout,result,result,end" || end == nil || mainText(end) != "82" || len(end.Results) != 2 {
			t.Errorf("streamed exec: %v, end %+v; want stdout,result,result,end and 82", types, end)
		}
		if len(resultAt) != 2 || resultAt[1]-resultAt[0] < 1000 {
			t.Errorf("results streamed at %v ms, want the display() before the sleep, the value after", resultAt)
		}
	})
}

func TestSessionRichResults(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{"profile": "data"})
		ex := s.cell(id, "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'n': [1, 2]})", "timeout", "120s")
		var df *nsjail.MIMEBundle
		for i := range ex.Results {
			if ex.Results[i].IsMainResult {
				df = &ex.Results[i]
			}
		}
		if df == nil || !strings.Contains(df.Text, "Oslo") || !strings.Contains(df.HTML, "<table") || !strings.Contains(df.HTML, "Lima") {
			t.Errorf("a DataFrame: %+v, want text and html", ex)
		}
		ex = s.cell(id, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()", "timeout", "120s")
		var pngs [][]byte
		for _, res := range ex.Results {
			if res.PNG != "" {
				b, err := base64.StdEncoding.DecodeString(res.PNG)
				if err != nil {
					t.Fatalf("png: %v", err)
				}
				pngs = append(pngs, b)
			}
		}
		if len(pngs) != 1 {
			t.Fatalf("plt.plot + plt.show: %d PNGs, want 1 (%+v)", len(pngs), ex)
		}
		if cfg, err := png.DecodeConfig(bytes.NewReader(pngs[0])); err != nil || cfg.Width < 100 {
			t.Errorf("the figure is not a valid PNG: %v %+v", err, cfg)
		}
		// Shown figures are closed: the next cell has none.
		if ex := s.cell(id, "1"); len(ex.Results) != 1 || ex.Results[0].PNG != "" {
			t.Errorf("a figure outlived its cell: %+v", ex.Results)
		}
	})
}

// A cell that ignores SIGINT is killed within the grace; the next cell
// runs on a fresh interpreter in the same workspace.
func TestSessionKilledAfterGrace(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{})
		s.cell(id, "x = 41\nopen('kept.txt', 'w').write('workspace')")
		start := time.Now()
		ex := s.cell(id, "import signal, threading, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(1)", "timeout", "1s")
		if ex.Status != nsjail.ExecTimeout || !ex.StateLost || !strings.Contains(ex.Message, "killed") {
			t.Errorf("a cell ignoring SIGINT: %+v, want timeout with state_lost", ex)
		}
		if d := time.Since(start); d > 1*time.Second+nsjail.InterruptGrace+20*time.Second {
			t.Errorf("killing it took %v", d)
		}
		ex = s.cell(id, "print('x' in globals(), open('kept.txt').read())")
		if ex.Stdout != "False workspace\n" || ex.Status != nsjail.ExecOK {
			t.Errorf("the next cell: %+v, want a fresh interpreter and the workspace kept", ex)
		}
		// A restart asked for: globals gone, workspace kept.
		s.cell(id, "y = 1")
		resp := s.do("POST", "/v1/sessions/"+id+"/restart", nil)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("restart: %s", resp.Status)
		}
		if ex := s.cell(id, "print('y' in globals(), open('kept.txt').read())"); ex.Stdout != "False workspace\n" {
			t.Errorf("after restart: %+v", ex)
		}
		// An interpreter that dies (os._exit) is restarted and says so.
		ex = s.cell(id, "import os; os._exit(3)")
		if ex.Status != nsjail.ExecKilled || !ex.StateLost || !strings.Contains(ex.Message, "exit status 3") {
			t.Errorf("os._exit(3): %+v", ex)
		}
		if ex := s.cell(id, "1 + 1"); mainText(ex) != "2" {
			t.Errorf("after os._exit: %+v", ex)
		}
	})
}

// 100 MB of output: the cell's streams keep their caps, and the protocol
// is intact (the result after it arrives, the next cell is clean).
func TestSessionOutputFlood(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{})
		ex := s.cell(id, "import sys, os\nsys.stdout.write('y' * 100_000_000)\nos.write(2, b'e' * 10_000_000)\nprint('tail')\n6 * 7", "timeout", "100s")
		if ex.Status != nsjail.ExecOK || mainText(ex) != "42" {
			t.Errorf("after 100 MB: status %s, main result %q, want ok and 42 (%s)", ex.Status, mainText(ex), ex.Message)
		}
		if ex.StdoutBytes != 100_000_005 || !ex.StdoutTruncated || len(ex.Stdout) > nsjail.SessionOutputLimit+100 || !strings.HasSuffix(ex.Stdout, "tail\n") {
			t.Errorf("stdout: %d bytes counted, truncated %v, %d kept; want 100000005, true, within the cap with the tail", ex.StdoutBytes, ex.StdoutTruncated, len(ex.Stdout))
		}
		if ex.StderrBytes != 10_000_000 || !ex.StderrTruncated || len(ex.Stderr) > nsjail.SessionOutputLimit+100 {
			t.Errorf("stderr: %d bytes, truncated %v, %d kept", ex.StderrBytes, ex.StderrTruncated, len(ex.Stderr))
		}
		logBytes := 0
		for _, l := range ex.Logs {
			logBytes += len(l.Data)
		}
		if logBytes > 2*nsjail.SessionOutputLimit || !ex.LogsTruncated {
			t.Errorf("logs: %d bytes, truncated %v", logBytes, ex.LogsTruncated)
		}
		if ex := s.cell(id, "print('clean')"); ex.Stdout != "clean\n" || ex.ExecutionCount != 2 {
			t.Errorf("the next cell: %+v", ex)
		}
	})
}

// A cell writes protocol frames, well-formed for every kind and seq, with
// and without a nonce's worth of prefix, to fds 1 and 2 and every other
// fd it can: nothing becomes a result, an error, a done, or another
// cell's output.
func TestSessionForgedFrames(t *testing.T) {
	forge := `import os, struct, json
frames = []
for seq in range(0, 8):
    for k, b in ((b"r", json.dumps({"text": "FORGED", "is_main_result": True}).encode()),
                 (b"x", json.dumps({"name": "Forged", "value": "v", "traceback": []}).encode()),
                 (b"d", b'{"status": "ok"}'), (b"o", b"FORGED-OUT"), (b"R", b"{}"), (b"F", b"{}")):
        for prefix in (b"", b"\0" * 16):
            frames.append(prefix + k + struct.pack(">I", seq) + b"\0" + b)
n = 0
for fd in range(3, 1024):
    for f in frames:
        try:
            os.write(fd, f)
            n += 1
        except OSError:
            pass
for f in frames[:4]:
    os.write(1, f)
    os.write(2, f)
print("wrote", n > 0)
`
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{})
		ex := s.cell(id, forge)
		if ex.Status != nsjail.ExecOK || len(ex.Results) != 0 || ex.Error != nil || !strings.HasSuffix(ex.Stdout, "wrote True\n") || !strings.Contains(ex.Stdout, "FORGED") {
			t.Errorf("forged frames: %+v, want no result or error, the frames as plain stdout", ex)
		}
		for i := 0; i < 3; i++ {
			ex := s.cell(id, "print('mine')")
			if ex.Stdout != "mine\n" || len(ex.Results) != 0 || ex.Error != nil || ex.Status != nsjail.ExecOK {
				t.Errorf("a cell after the forger: %+v", ex)
			}
		}
		// The driver's socket reaches nothing the cell starts.
		ex = s.cell(id, "import subprocess\nprint(subprocess.run(['ls', '/proc/self/fd'], capture_output=True, text=True).stdout.split())")
		if strings.TrimSpace(ex.Stdout) != "['0', '1', '2', '3']" {
			t.Errorf("a child's fds: %q, want 0-2 and ls's own listing", ex.Stdout)
		}
	})
}

func TestSessionFiles(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{"limits": map[string]any{"workspace_size": "8M"}})
		blob := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 kB: several frames
		sum := sha256.Sum256(blob)
		resp := s.do("PUT", "/v1/sessions/"+id+"/files?path=in/data.bin", string(blob))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), hex.EncodeToString(sum[:])) {
			t.Fatalf("PUT: %s %s", resp.Status, b)
		}
		ex := s.cell(id, "import hashlib\nprint(hashlib.sha256(open('in/data.bin', 'rb').read()).hexdigest())\nopen('out.txt', 'w').write('from the cell')\nimport os; os.symlink('/etc/passwd', 'link')")
		if strings.TrimSpace(ex.Stdout) != hex.EncodeToString(sum[:]) {
			t.Errorf("the cell read %q", ex.Stdout)
		}
		resp = s.do("GET", "/v1/sessions/"+id+"/files?path=out.txt", nil)
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "from the cell" || resp.Header.Get("X-Sbx-Sha256") == "" {
			t.Errorf("GET out.txt: %s %q", resp.Status, b)
		}
		for _, p := range []string{"link", "../etc/passwd", "/etc/passwd", "in/../../x"} {
			resp = s.do("GET", "/v1/sessions/"+id+"/files?path="+p, nil)
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 || strings.Contains(string(b), "root:") {
				t.Errorf("GET %s: %s %q, want refused", p, resp.Status, b)
			}
		}
		resp = s.do("GET", "/v1/sessions/"+id+"/files", nil)
		var list struct {
			Files []nsjail.SessionFile `json:"files"`
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		got := map[string]string{}
		for _, f := range list.Files {
			got[f.Path] = f.SHA256
		}
		if got["in/data.bin"] != hex.EncodeToString(sum[:]) || got["out.txt"] == "" || len(got) != 2 {
			t.Errorf("listing: %+v, want in/data.bin and out.txt (not the link)", list.Files)
		}
		resp = s.do("GET", "/v1/sessions/"+id+"/files?path=in", nil)
		list.Files = nil
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(list.Files) != 1 || list.Files[0].Path != "in/data.bin" {
			t.Errorf("listing below in/: %s %+v", resp.Status, list.Files)
		}
		resp = s.do("DELETE", "/v1/sessions/"+id+"/files?path=out.txt", nil)
		resp.Body.Close()
		if ex := s.cell(id, "import os; os.path.exists('out.txt')"); resp.StatusCode != 204 || mainText(ex) != "False" {
			t.Errorf("DELETE out.txt: %s, then exists %q", resp.Status, mainText(ex))
		}
		// The workspace's size cap holds across cells.
		s.cell(id, "open('a', 'wb').write(b'a' * 5_000_000)")
		ex = s.cell(id, "open('b', 'wb').write(b'b' * 5_000_000)")
		if ex.Error == nil || ex.Error.Name != "OSError" || !strings.Contains(ex.Error.Value, "No space left") {
			t.Errorf("10 MB in an 8 MB workspace over two cells: %+v", ex.Error)
		}
	})
}

// TTL and idle expiry destroy the sandbox: no process, no cgroup left;
// the cap counts open sessions.
func TestSessionExpiry(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "", "--max-sessions", "2")
		ttl := s.newSession(map[string]any{"ttl": "3s"})
		idle := s.newSession(map[string]any{"idle_timeout": "2s"})
		resp := s.do("POST", "/v1/sessions", map[string]any{})
		resp.Body.Close()
		if resp.StatusCode != 429 {
			t.Errorf("a third session with --max-sessions 2: %s, want 429", resp.Status)
		}
		if len(childrenOf(s.cmd.Process.Pid)) == 0 {
			t.Fatalf("no sandbox processes while the sessions live")
		}
		s.cell(ttl, "1")
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && len(childrenOf(s.cmd.Process.Pid)) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if c := childrenOf(s.cmd.Process.Pid); len(c) > 0 {
			t.Errorf("sandbox processes left after the TTL and the idle timeout: %v", c)
		}
		for _, id := range []string{ttl, idle} {
			resp := s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": "1"})
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Errorf("exec in expired session %s: %s, want 404", id, resp.Status)
			}
			if cg := cgroupsNamed("sbx-" + id); len(cg) > 0 {
				t.Errorf("cgroups of session %s left: %v", id, cg)
			}
		}
		if ents, _ := os.ReadDir(s.tmp); len(ents) > 0 {
			t.Errorf("temp files left: %v", ents)
		}
	})
}

// Memory or pids exhaustion inside a cell is reported as that limit, and
// the session's fate is stated: the memory limit's OOM kill restarts the
// interpreter (state_lost), a refused fork leaves it as it was.
func TestSessionLimits(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{"limits": map[string]any{"memory": "256M", "pids": 32}})
		s.cell(id, "x = 41")
		ex := s.cell(id, "hog = []\nwhile True: hog.append(b'a' * (1 << 20))", "timeout", "60s")
		cgroup := ex.Usage.MemoryPeakBytes > 0
		switch {
		case ex.Limit != "memory":
			t.Errorf("a memory hog: limit %q, want memory (%+v)", ex.Limit, ex)
		case cgroup && (ex.Status != nsjail.ExecKilled || !ex.StateLost || !strings.Contains(ex.Message, "OOM killer")):
			t.Errorf("a memory hog under a cgroup: %+v, want killed, state_lost, the OOM killer named", ex)
		case !cgroup && (ex.Status != nsjail.ExecError || ex.StateLost || ex.Error.Name != "MemoryError"):
			t.Errorf("a memory hog under rlimits: %+v, want MemoryError with the state kept", ex)
		}
		if ex := s.cell(id, "print('after')"); ex.Stdout != "after\n" || ex.Limit != "" {
			t.Errorf("the cell after the hog: %+v", ex)
		}
		ex = s.cell(id, "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('refused', e.errno)", "timeout", "60s")
		if !strings.HasPrefix(ex.Stdout, "refused 11") || ex.StateLost || (cgroup && ex.Limit != "pids") {
			t.Errorf("a fork bomb: %+v, want refused forks, the state kept, and limit pids under a cgroup", ex)
		}
		if ex := s.cell(id, "1 + 1"); mainText(ex) != "2" {
			t.Errorf("after the fork bomb: %+v", ex)
		}
	})
}

// A snapshot of a session's workspace is restored into a new session;
// the interpreter's state is not. The drain removes the snapshots.
func TestSessionSnapshot(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		a := s.newSession(map[string]any{})
		s.cell(a, "import os\nx = 41\nos.makedirs('d/e')\nopen('d/e/f.txt', 'w').write('deep')\nopen('top.bin', 'wb').write(bytes(range(256)) * 1000)")
		resp := s.do("POST", "/v1/sessions/"+a+"/snapshot", nil)
		var snap struct {
			ID    string `json:"snapshot_id"`
			Files int    `json:"files"`
		}
		json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if resp.StatusCode != 201 || snap.ID == "" || snap.Files != 2 {
			t.Fatalf("snapshot: %s %+v", resp.Status, snap)
		}
		s.cell(a, "open('later.txt', 'w').write('after the snapshot')")
		s.do("DELETE", "/v1/sessions/"+a, nil).Body.Close()
		b := s.newSession(map[string]any{"from_snapshot": snap.ID})
		ex := s.cell(b, "import os, hashlib\nprint(open('d/e/f.txt').read(), hashlib.sha256(open('top.bin', 'rb').read()).hexdigest() == hashlib.sha256(bytes(range(256)) * 1000).hexdigest(), os.path.exists('later.txt'), 'x' in globals())")
		if ex.Stdout != "deep True False False\n" {
			t.Errorf("restored session: %q, want the snapshot's files and fresh globals", ex.Stdout)
		}
		resp = s.do("POST", "/v1/sessions", map[string]any{"from_snapshot": "snap-nope"})
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("an unknown snapshot: %s, want 404", resp.Status)
		}
		if err := s.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if ents, _ := os.ReadDir(s.tmp); len(ents) > 0 {
			t.Errorf("the server left %v in its TMPDIR", ents)
		}
	})
}

// sbx repl: a live session at a prompt, run locally, no server.
func TestRepl(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "x = 41\nx + 1\ndef f(n):\n    return 10 / n\n\nf(2)\nf(0)\nfor i in range(2):\n    print(i)\n\nx\n", "repl", "--profile", "strict")
		if out.code != 0 || out.stdout != "42\n5.0\n0\n1\n41\n" {
			t.Errorf("sbx repl: exit %d, stdout %q, stderr %q", out.code, out.stdout, out.stderr)
		}
		if !strings.Contains(out.stderr, "File \"<cell-3>\", line 2, in f\n    return 10 / n\nZeroDivisionError: division by zero") {
			t.Errorf("sbx repl's traceback: %q", out.stderr)
		}
	})
}

// Each cell is one audit line: the session's id and the cell's number,
// the hash of its code, its status, the request id, token and metadata.
func TestSessionAudit(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir := ownedDir(t, r)
		log := dir + "/audit.jsonl"
		s := startServe(t, r, "session-audit-token-0123456789", "--audit-log", log)
		id := s.newSession(map[string]any{"metadata": map[string]any{"task": "t-9"}})
		resp := s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": "1/0"}, "X-Request-Id", "req-77")
		resp.Body.Close()
		b, _ := os.ReadFile(log)
		var e struct {
			ID         string         `json:"id"`
			CodeSHA256 string         `json:"code_sha256"`
			Status     string         `json:"status"`
			RequestID  string         `json:"request_id"`
			Token      string         `json:"token"`
			Metadata   map[string]any `json:"metadata"`
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		json.Unmarshal([]byte(lines[len(lines)-1]), &e)
		sum := sha256.Sum256([]byte("1/0"))
		if e.ID != id+"/1" || e.CodeSHA256 != hex.EncodeToString(sum[:]) || e.Status != "error" || e.RequestID != "req-77" || e.Token != "agent-7" || e.Metadata["task"] != "t-9" {
			t.Errorf("audit line: %+v\n%s", e, b)
		}
		// A wrong token is refused before any session is looked up.
		resp = s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": "1"}, "Authorization", "Bearer wrong")
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("a wrong token: %s", resp.Status)
		}
	})
}

// --session-pool: a session started ahead is handed out at once and
// behaves as any; one with limits of its own starts cold; the drain
// leaves nothing of either.
func TestSessionPool(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "", "--session-pool", "standard=1")
		var pooled string
		deadline := time.Now().Add(60 * time.Second)
		for pooled == "" && time.Now().Before(deadline) {
			time.Sleep(300 * time.Millisecond)
			resp := s.do("POST", "/v1/sessions", map[string]any{"profile": "standard"})
			var info struct {
				ID     string `json:"id"`
				Pooled bool   `json:"pooled"`
			}
			json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if info.Pooled {
				pooled = info.ID
			} else if info.ID != "" {
				s.do("DELETE", "/v1/sessions/"+info.ID, nil).Body.Close()
			}
		}
		if pooled == "" {
			t.Fatalf("no pooled session within 60s:\n%s", s.stderr)
		}
		s.cell(pooled, "x = 41")
		if ex := s.cell(pooled, "x + 1"); mainText(ex) != "42" || ex.ExecutionCount != 2 {
			t.Errorf("a pooled session: %+v", ex)
		}
		cold := s.newSession(map[string]any{"profile": "standard", "limits": map[string]any{"memory": "256M"}})
		resp := s.do("GET", "/v1/sessions/"+cold, nil)
		var info struct {
			Pooled bool `json:"pooled"`
		}
		json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if info.Pooled {
			t.Errorf("a session with limits of its own came from the pool")
		}
		pid := s.cmd.Process.Pid
		if err := s.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if c := childrenOf(pid); len(c) > 0 {
			t.Errorf("processes left after the drain: %v", c)
		}
		for _, id := range []string{pooled, cold} {
			if cg := cgroupsNamed("sbx-" + id); len(cg) > 0 {
				t.Errorf("cgroups of session %s left: %v", id, cg)
			}
		}
	})
}

// A result item over the inline cap (a 5 MB html) comes back as a file
// of the workspace, {path, size, sha256}, whose bytes GET .../files
// fetches; streamed, the result says the same. In a workspace too small
// for it, the results say truncated, and why, and nothing is left half
// written.
func TestSessionLargeResultFile(t *testing.T) {
	const big = "class H:\n    def _repr_html_(self):\n        return '<p>' + 'x' * 5_000_000 + '</p>'\ndisplay(1)\nH()"
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		id := s.newSession(map[string]any{"limits": map[string]any{"workspace_size": "32M"}})
		ex := s.cell(id, big)
		if ex.Status != nsjail.ExecOK || len(ex.Results) != 2 || ex.ResultsTruncated {
			t.Fatalf("a 5 MB html: status %s, %d results, truncated %v (%s)", ex.Status, len(ex.Results), ex.ResultsTruncated, ex.ResultsTruncatedReason)
		}
		main := ex.Results[1]
		f, ok := main.Files["html"]
		if !main.IsMainResult || main.HTML != "" || !ok || f.Path != nsjail.ResultsDir+"/1-2.html" || f.Size != 5_000_007 {
			t.Fatalf("the main result: is_main %v, %d bytes inline, files %+v; want html in %s/1-2.html, 5000007 bytes", main.IsMainResult, len(main.HTML), main.Files, nsjail.ResultsDir)
		}
		if ex.Results[0].Text != "1" || ex.Results[0].Files != nil {
			t.Errorf("a small result: %+v, want inline", ex.Results[0])
		}
		resp := s.do("GET", "/v1/sessions/"+id+"/files?path="+f.Path, nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(b)
		if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != f.SHA256 || int64(len(b)) != f.Size || !strings.HasPrefix(string(b), "<p>xxx") {
			t.Errorf("GET %s: %s, %d bytes, sha256 %x; the Execution says %d bytes, %s", f.Path, resp.Status, len(b), sum, f.Size, f.SHA256)
		}

		// Streamed: the result event carries the same reference.
		resp = s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": big}, "Accept", "application/x-ndjson")
		var streamed []nsjail.MIMEBundle
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct {
				Type   string             `json:"type"`
				Result *nsjail.MIMEBundle `json:"result"`
			}
			json.Unmarshal(sc.Bytes(), &ev)
			if ev.Type == "result" && ev.Result != nil {
				streamed = append(streamed, *ev.Result)
			}
		}
		resp.Body.Close()
		if len(streamed) != 2 || streamed[0].Text != "1" || streamed[1].HTML != "" || streamed[1].Files["html"].Path != nsjail.ResultsDir+"/2-2.html" {
			t.Errorf("streamed: %d results, want display(1) then the file reference (%+v)", len(streamed), streamed)
		}

		// No room: truncated, with the reason; no partial file.
		small := s.newSession(map[string]any{"limits": map[string]any{"workspace_size": "2M"}})
		ex = s.cell(small, big)
		if !ex.ResultsTruncated || !strings.Contains(ex.ResultsTruncatedReason, "No space left") || len(ex.Results) != 2 || ex.Results[1].HTML != "" || ex.Results[1].Files != nil {
			t.Errorf("a 5 MB html in a 2 MB workspace: truncated %v (%q), results %d", ex.ResultsTruncated, ex.ResultsTruncatedReason, len(ex.Results))
		}
		if ex := s.cell(small, "import os; os.path.exists('.sbx/results/1-2.html')"); mainText(ex) != "False" {
			t.Errorf("the partial file was left: %q", mainText(ex))
		}
	})
}
