//go:build integration

package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// server is one `sbx serve` the test started on 127.0.0.1, a random port.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	token  string
	tmp    string // the server's TMPDIR
	stderr *lockedBuffer
	exited chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ownedDir is a temporary directory that r's uid owns, for the server's
// files (token file, audit log, TMPDIR).
func ownedDir(t *testing.T, r runner) string {
	// Not t.TempDir: its parent is root's, mode 0700.
	dir, err := os.MkdirTemp("", "sbx-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, r.uid, r.uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServe starts `sbx serve --listen 127.0.0.1:0 ARGS` as r and waits
// for its "listening on" line. It is drained (SIGTERM) at the test's end.
func startServe(t *testing.T, r runner, token string, args ...string) *server {
	t.Helper()
	dir := ownedDir(t, r)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	os.Chown(tmp, r.uid, r.uid)
	if token != "" {
		tf := filepath.Join(dir, "tokens")
		if err := os.WriteFile(tf, []byte("# test tokens\nagent-7:"+token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(tf, r.uid, r.uid)
		args = append(args, "--token-file", tf)
	}
	cmd := r.command(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	s := &server{t: t, cmd: cmd, token: token, tmp: tmp, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	s.base = "http://" + startListening(t, cmd, s.stderr, s.exited)
	t.Cleanup(func() { s.stop() })
	return s
}

// stop drains the server (SIGTERM) and waits for it; it is killed by pid
// if it does not exit in time.
func (s *server) stop() error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		return err
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("sbx serve did not exit within 60s of SIGTERM:\n%s", s.stderr)
	}
}

// do sends a request; body is marshalled to JSON unless it is a string.
func (s *server) do(method, path string, body any, hdr ...string) *http.Response {
	s.t.Helper()
	var rd io.Reader
	if b, ok := body.(string); ok {
		rd = strings.NewReader(b)
	} else if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v\nserver:\n%s", method, path, err, s.stderr)
	}
	return resp
}

// serveResult is the response of POST /v1/exec.
type serveResult struct {
	nsjail.Result
	RequestID string `json:"request_id"`
	Outputs   []struct {
		Path       string `json:"path"`
		Size       int64  `json:"size"`
		ContentB64 string `json:"content_b64"`
	} `json:"outputs"`
}

// exec posts body to /v1/exec and decodes the 200 Result, strictly.
func (s *server) exec(body any) (*serveResult, map[string]any) {
	s.t.Helper()
	resp := s.do("POST", "/v1/exec", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		s.t.Fatalf("POST /v1/exec %v: %s: %s", body, resp.Status, b)
	}
	var res serveResult
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		s.t.Fatalf("bad Result (%v): %s", err, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return &res, m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The acceptance of issue 14: print(1) over HTTP is the Result of sbx
// exec --json, same fields, plus request_id; a workspace is never shared;
// files go in and come out inline.
func TestServeExec(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		res, m := s.exec(map[string]any{"code": "print(1)"})
		if res.Status != nsjail.StatusOK || res.Stdout != "1\n" || res.RequestID == "" || res.Profile != "standard" {
			t.Fatalf("print(1): %s %q %q request_id %q profile %s", res.Status, res.Stdout, res.Message, res.RequestID, res.Profile)
		}
		cold, _ := r.result(t, "-c", "print(1)")
		cj, _ := json.Marshal(cold)
		var cm map[string]any
		json.Unmarshal(cj, &cm)
		cm["request_id"] = ""
		if got, want := strings.Join(keys(m), " "), strings.Join(keys(cm), " "); got != want {
			t.Errorf("fields differ from sbx exec --json:\nserve: %s\nexec:  %s", got, want)
		}
		if fmt.Sprint(keys(m["limits"].(map[string]any))) != fmt.Sprint(keys(cm["limits"].(map[string]any))) {
			t.Errorf("limits differ: %v vs %v", keys(m["limits"].(map[string]any)), keys(cm["limits"].(map[string]any)))
		}

		// One request's workspace and /tmp are gone for the next.
		w, _ := s.exec(map[string]any{"code": "open('left.txt','w').write('x'); open('/tmp/left','w').write('x')"})
		if w.Status != nsjail.StatusOK {
			t.Fatalf("write: %s %s %s", w.Status, w.Message, w.Stderr)
		}
		g, _ := s.exec(map[string]any{"code": "import os; print(os.path.exists('left.txt'), os.path.exists('/tmp/left'))"})
		if g.Stdout != "False False\n" {
			t.Errorf("a file of the previous request is visible: %q %s", g.Stdout, g.Stderr)
		}

		// Inputs, stdin, env and argv in; outputs out, inline.
		in := base64.StdEncoding.EncodeToString([]byte("hello\n"))
		f, _ := s.exec(map[string]any{
			"argv":    []string{"python3", "-c", "import os,sys; d=open('data/in.txt').read(); open('out.txt','w').write(d.upper()+sys.stdin.read()+os.environ['GREETING'])"},
			"files":   []map[string]any{{"path": "data/in.txt", "content_b64": in}},
			"stdin":   "from stdin\n",
			"env":     map[string]string{"GREETING": "hi"},
			"outputs": true,
		})
		if f.Status != nsjail.StatusOK || len(f.Outputs) != 1 || f.Outputs[0].Path != "out.txt" {
			t.Fatalf("outputs: %s %s %q %+v", f.Status, f.Message, f.Stderr, f.Outputs)
		}
		if b, _ := base64.StdEncoding.DecodeString(f.Outputs[0].ContentB64); string(b) != "HELLO\nfrom stdin\nhi" {
			t.Errorf("out.txt = %q", b)
		}
		if len(f.Inputs) != 1 || f.Inputs[0].Source != "files[0]" {
			t.Errorf("inputs name a host path of the server: %+v", f.Inputs)
		}
		for _, e := range f.Files {
			if e.CopiedTo != "" {
				t.Errorf("files[] names a host path of the server: %+v", e)
			}
		}
		// A traceback names the code's file in the workspace.
		e, _ := s.exec(map[string]any{"code": "raise SystemExit(3)"})
		if e.Status != nsjail.StatusExit || e.ExitCode != 3 {
			t.Errorf("exit 3: %s %d", e.Status, e.ExitCode)
		}
	})
}

// Limits may be lowered, never raised; a bad request is a 400 naming the
// field; GET endpoints answer.
func TestServeLimitsLowerOnly(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		for _, tc := range []struct {
			body any
			want string
		}{
			{map[string]any{"code": "print(1)", "profile": "strict", "limits": map[string]any{"memory": "2G"}}, `limits.memory \"2G\": above the profile's 256M (strict)`},
			{map[string]any{"code": "print(1)", "profile": "strict", "limits": map[string]any{"pids": 1000}}, `limits.pids \"1000\": above the profile's 64`},
			{map[string]any{"code": "print(1)", "limits": map[string]any{"memroy": "1M"}}, `limits.memroy: not a limit a request may set (did you mean memory?)`},
			{map[string]any{"code": "print(1)", "profile": "nosuch"}, `profile \"nosuch\": not offered`},
			{map[string]any{"code": "print(1)", "limit": map[string]any{}}, `unknown field \"limit\"`},
			{map[string]any{}, `nothing to run`},
			{map[string]any{"code": "1", "argv": []string{"x"}}, `code and argv`},
			{map[string]any{"code": "1", "files": []map[string]any{{"path": "../x", "content_b64": ""}}}, `files[0].path \"../x\"`},
			{`{"code": `, `request body`},
			{map[string]any{"argv": []string{"python3", "-c", "1", strings.Repeat("x", 200000)}}, `argv or env: argument 3 is`},
			{map[string]any{"code": "1", "env": map[string]string{"BIG": strings.Repeat("y", 200000)}}, `argv or env: environment variable BIG`},
		} {
			resp := s.do("POST", "/v1/exec", tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `"code":"bad_request"`) {
				t.Errorf("%v: %s %s, want 400 saying %s", tc.body, resp.Status, b, tc.want)
			}
		}
		res, _ := s.exec(map[string]any{"code": "import time; time.sleep(30)", "profile": "strict", "limits": map[string]any{"memory": "64M", "wall_time": "1s", "pids": 16}})
		if res.Status != nsjail.StatusTimeout {
			t.Errorf("wall_time 1s: status %s (%s)", res.Status, res.Message)
		}
		if l := res.Limits["memory"]; l.Value != 64<<20 {
			t.Errorf("memory limit in the Result: %+v, want 64M", l)
		}
		if l := res.Limits["pids"]; l.Value != 16 {
			t.Errorf("pids limit in the Result: %+v, want 16", l)
		}
		for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ready"`, "/v1/version": `"commit"`, "/v1/profiles": `"strict"`} {
			resp := s.do("GET", path, nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
				t.Errorf("GET %s: %s %s", path, resp.Status, b)
			}
		}
	})
}

// No token, or a wrong one, is a 401; the audit line names the token and
// carries the request id and metadata. A non-loopback address without a
// token is refused at start.
func TestServeAuthAndAudit(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir := ownedDir(t, r)
		log := filepath.Join(dir, "audit.jsonl")
		token := "0123456789abcdef0123456789abcdef"
		s := startServe(t, r, token, "--audit-log", log)
		for _, auth := range []string{"", "Bearer nope", "Bearer " + token + "x", token} {
			resp := s.do("POST", "/v1/exec", map[string]any{"code": "print(1)"}, "Authorization", auth)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(b), `"unauthorized"`) || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("Authorization %q: %s %s, want 401", auth, resp.Status, b)
			}
		}
		resp := s.do("GET", "/v1/profiles", nil, "Authorization", "")
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("GET /v1/profiles without a token: %s", resp.Status)
		}
		resp = s.do("POST", "/v1/exec", map[string]any{"code": "print(1)", "metadata": map[string]any{"task": "t-42", "step": 3}}, "X-Request-Id", "req-abc.1")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"request_id":"req-abc.1"`) {
			t.Fatalf("with the token: %s %s", resp.Status, b)
		}
		if err := s.stop(); err != nil {
			t.Fatalf("drain: %v", err)
		}
		lines, _ := os.ReadFile(log)
		ls := strings.Split(strings.TrimSpace(string(lines)), "\n")
		if len(ls) != 1 {
			t.Fatalf("audit log has %d lines, want 1 (refused requests are not runs):\n%s", len(ls), lines)
		}
		var e map[string]any
		json.Unmarshal([]byte(ls[0]), &e)
		md, _ := e["metadata"].(map[string]any)
		if e["request_id"] != "req-abc.1" || e["token"] != "agent-7" || md["task"] != "t-42" || strings.Contains(ls[0], token) {
			t.Errorf("audit line: %s", ls[0])
		}

		out := r.exec(t, "", "serve", "--listen", "0.0.0.0:0")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "not a loopback address, and no token") {
			t.Errorf("non-loopback without a token: exit %d, %s", out.code, out.stderr)
		}
	})
}

// streamLines posts body with Accept: application/x-ndjson and returns
// the response and a channel of its lines with their arrival times.
type line struct {
	at time.Time
	ev map[string]any
}

func (s *server) stream(body any) (*http.Response, <-chan line) {
	s.t.Helper()
	resp := s.do("POST", "/v1/exec", body, "Accept", "application/x-ndjson")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("stream: %s %s %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	ch := make(chan line, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = map[string]any{"type": "BAD", "data": sc.Text()}
			}
			ch <- line{time.Now(), ev}
		}
	}()
	return resp, ch
}

// Streaming delivers stdout before the run ends; a client that goes away
// cancels its run; past --max-concurrent and --queue a request gets 429
// with Retry-After.
func TestServeStreamAndAdmission(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "", "--max-concurrent", "1", "--queue", "0")
		resp, ch := s.stream(map[string]any{"code": "import sys,time\nprint('first', flush=True)\nprint('err', file=sys.stderr, flush=True)\ntime.sleep(2)\nprint('last')"})
		var got []line
		for l := range ch {
			got = append(got, l)
		}
		resp.Body.Close()
		if len(got) < 3 {
			t.Fatalf("stream: %d lines: %v", len(got), got)
		}
		// stdout and stderr are two pipes: which is read first is the
		// scheduler's choice, so find the first stdout.
		first, last := got[0], got[len(got)-1]
		for _, l := range got {
			if l.ev["type"] == "stdout" {
				first = l
				break
			}
		}
		if first.ev["type"] != "stdout" || !strings.HasPrefix(first.ev["data"].(string), "first") {
			t.Errorf("first stdout event: %v", first.ev)
		}
		if last.ev["type"] != "result" {
			t.Fatalf("last event: %v", last.ev)
		}
		res, _ := last.ev["result"].(map[string]any)
		if res["status"] != "ok" || res["stdout"] != "first\nlast\n" || res["request_id"] == "" {
			t.Errorf("result event: %v", res)
		}
		// The payload sleeps 2s between "first" and its end: the first
		// line came at least a second before the result, however loaded
		// the machine is.
		if gap := last.at.Sub(first.at); gap < time.Second {
			t.Errorf("stdout came %v before the result: not streamed", gap)
		}
		sawErr := false
		for _, l := range got {
			sawErr = sawErr || (l.ev["type"] == "stderr" && strings.Contains(fmt.Sprint(l.ev["data"]), "err"))
			if l.ev["type"] == "BAD" {
				t.Errorf("not JSON: %v", l.ev["data"])
			}
		}
		if !sawErr {
			t.Errorf("no stderr event in %v", got)
		}

		// One run holds the only worker: the next request is refused.
		mark := marker(t)
		defer killMarked(mark)
		resp, ch = s.stream(map[string]any{"argv": []string{"python3", "-c", "import time; print('up', flush=True); time.sleep(120)", mark}})
		if l, ok := <-ch; !ok || l.ev["type"] != "stdout" {
			t.Fatalf("long run did not start: %v", l.ev)
		}
		busy := s.do("POST", "/v1/exec", map[string]any{"code": "print(1)"})
		b, _ := io.ReadAll(busy.Body)
		busy.Body.Close()
		if busy.StatusCode != 429 || busy.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"busy"`) {
			t.Errorf("full: %s Retry-After %q %s, want 429", busy.Status, busy.Header.Get("Retry-After"), b)
		}
		ready := s.do("GET", "/readyz", nil)
		ready.Body.Close()
		if ready.StatusCode != 503 {
			t.Errorf("/readyz at capacity: %s, want 503", ready.Status)
		}
		// The client goes away: the run is cancelled and its processes
		// are gone, well before its 120s.
		if len(processesWith(mark)) == 0 {
			t.Fatalf("the long run's payload is not visible as a process")
		}
		resp.Body.Close()
		deadline := time.Now().Add(30 * time.Second)
		for len(processesWith(mark)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the run of a client that went away still runs 30s later")
			}
			time.Sleep(100 * time.Millisecond)
		}
		// And the worker is free again, once the handler has reported.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ready := s.do("GET", "/readyz", nil)
			ready.Body.Close()
			if ready.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz still %s 30s after the cancel", ready.Status)
			}
		}
		after, _ := s.exec(map[string]any{"code": "print(2)"})
		if after.Status != nsjail.StatusOK {
			t.Errorf("after the cancel: %s %s", after.Status, after.Message)
		}
	})
}

// SIGTERM mid-run drains: /readyz says 503, new runs are refused, the run
// in flight is killed at --drain-timeout with a Result that says so, sbx
// exits 0, and nothing of it is left: no process, cgroup or temp dir.
func TestServeDrain(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "", "--drain-timeout", "3s")
		mark := marker(t)
		defer killMarked(mark)
		quick, _ := s.exec(map[string]any{"code": "print(1)"})
		resp, ch := s.stream(map[string]any{"argv": []string{"python3", "-c", "import time; print('up', flush=True); time.sleep(120)", mark}})
		defer resp.Body.Close()
		if l, ok := <-ch; !ok || l.ev["type"] != "stdout" {
			t.Fatalf("long run did not start: %v", l.ev)
		}
		pid := s.cmd.Process.Pid
		s.cmd.Process.Signal(syscall.SIGTERM)
		// Within the 3s drain: not ready, and no new run.
		time.Sleep(300 * time.Millisecond)
		ready := s.do("GET", "/readyz", nil)
		ready.Body.Close()
		if ready.StatusCode != 503 {
			t.Errorf("/readyz while draining: %s, want 503", ready.Status)
		}
		refused := s.do("POST", "/v1/exec", map[string]any{"code": "print(1)"})
		b, _ := io.ReadAll(refused.Body)
		refused.Body.Close()
		if refused.StatusCode != 503 || !strings.Contains(string(b), `"draining"`) {
			t.Errorf("a new run while draining: %s %s, want 503", refused.Status, b)
		}
		var last line
		for l := range ch {
			last = l
		}
		res, _ := last.ev["result"].(map[string]any)
		if last.ev["type"] != "result" || res["status"] != string(nsjail.StatusCanceled) || !strings.Contains(fmt.Sprint(res["message"]), "--drain-timeout") {
			t.Errorf("the killed run's result: %v", last.ev)
		}
		select {
		case err := <-s.exited:
			if err != nil {
				t.Errorf("sbx serve after the drain: %v, want exit 0\n%s", err, s.stderr)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("sbx serve did not exit after the drain:\n%s", s.stderr)
		}
		drainedLeftNothing(t, pid, mark, s.tmp, quick.ID, fmt.Sprint(res["id"]))
	})
}

// drainedLeftNothing checks what a drained server (pid) must not leave:
// payload processes with mark, children, files in its TMPDIR, or the
// cgroups of the runs ids.
func drainedLeftNothing(t *testing.T, pid int, mark, tmp string, ids ...string) {
	t.Helper()
	if left := processesWith(mark); len(left) > 0 {
		t.Errorf("payload processes left: %v", left)
	}
	if children := childrenOf(pid); len(children) > 0 {
		t.Errorf("processes of the server left: %v", children)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("temp files of the server left in its TMPDIR: %v", ents)
	}
	for _, id := range ids {
		if cg := cgroupsNamed("sbx-" + id); id != "" && len(cg) > 0 {
			t.Errorf("cgroups of run %s left: %v", id, cg)
		}
	}
}

// A server whose stderr's reader is gone (a journal restarted, a closed
// terminal) still drains: its log lines fail with EPIPE instead of ending
// it by SIGPIPE in the middle of killing its sandboxes (which, on cgroup
// v1, left a sandbox frozen until the next sbx's stale cleanup). It exits
// 0 and leaves nothing.
func TestServeDrainsWithItsLogReaderGone(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		tmp := filepath.Join(ownedDir(t, r), "tmp")
		os.Mkdir(tmp, 0o700)
		os.Chown(tmp, r.uid, r.uid)
		mark := marker(t)
		defer killMarked(mark)
		cmd := r.command("serve", "--listen", "127.0.0.1:0", "--drain-timeout", "2s")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				<-exited
			}
		})
		first := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(pr).ReadString('\n')
			first <- l
		}()
		var addr string
		select {
		case l := <-first:
			a, ok := strings.CutPrefix(l, "sbx serve: listening on ")
			if !ok {
				t.Fatalf("sbx serve's first line: %q", l)
			}
			addr = strings.SplitN(a, ";", 2)[0]
		case <-time.After(30 * time.Second):
			t.Fatal("sbx serve did not listen within 30s")
		}
		// The reader goes: every later write to the server's stderr
		// gets EPIPE.
		pr.Close()
		s := &server{t: t, cmd: cmd, base: "http://" + addr, tmp: tmp, stderr: &lockedBuffer{}, exited: exited}
		resp, ch := s.stream(map[string]any{"argv": []string{"python3", "-c", "import time; print('up', flush=True); time.sleep(120)", mark}})
		defer resp.Body.Close()
		if l, ok := <-ch; !ok || l.ev["type"] != "stdout" {
			t.Fatalf("long run did not start: %v", l.ev)
		}
		pid := cmd.Process.Pid
		cmd.Process.Signal(syscall.SIGTERM)
		var last line
		for l := range ch {
			last = l
		}
		res, _ := last.ev["result"].(map[string]any)
		if last.ev["type"] != "result" || res["status"] != string(nsjail.StatusCanceled) {
			t.Errorf("the drained run's result: %v", last.ev)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sbx serve with its stderr's reader gone, after the drain: %v, want exit 0", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("sbx serve did not exit after the drain")
		}
		id, _ := res["id"].(string)
		drainedLeftNothing(t, pid, mark, tmp, id)
	})
}

// A slow client holds a connection, never the worker: with one worker
// and no queue, a client stuck in its body does not make the next request
// a 429, and is answered 408 when its body deadline passes. A body past
// --max-body is a 413, and too many files a 400.
func TestServeHostileClients(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "", "--max-concurrent", "1", "--queue", "0", "--max-body", "65536", "--body-timeout", "2s")
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"code\": \"pri")
		time.Sleep(300 * time.Millisecond)
		res, _ := s.exec(map[string]any{"code": "print(1)"})
		if res.Status != nsjail.StatusOK {
			t.Errorf("next to a stalled client: %s %s", res.Status, res.Message)
		}
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if status, err := readLine(conn); !strings.Contains(status, " 408 ") {
			t.Errorf("the stalled client got %q (%v), want 408 after --body-timeout", status, err)
		}
		big := s.do("POST", "/v1/exec", map[string]any{"code": strings.Repeat("#", 100000)})
		b, _ := io.ReadAll(big.Body)
		big.Body.Close()
		if big.StatusCode != 413 || !strings.Contains(string(b), "--max-body") {
			t.Errorf("a body past --max-body: %s %s", big.Status, b)
		}
		files := make([]map[string]any, 300)
		for i := range files {
			files[i] = map[string]any{"path": fmt.Sprintf("f%d", i), "content_b64": ""}
		}
		many := s.do("POST", "/v1/exec", map[string]any{"code": "1", "files": files})
		b, _ = io.ReadAll(many.Body)
		many.Body.Close()
		if many.StatusCode != 400 || !strings.Contains(string(b), "files: 300 files") {
			t.Errorf("300 files: %s %s", many.Status, b)
		}
	})
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		i := bytes.LastIndexByte(b, ')')
		var state string
		var ppid int
		if i > 0 {
			fmt.Sscan(string(b[i+1:]), &state, &ppid)
		}
		if ppid == pid {
			var p int
			fmt.Sscan(e.Name(), &p)
			out = append(out, p)
		}
	}
	return out
}

// cgroupsNamed lists the cgroup directories called name, in every
// hierarchy.
func cgroupsNamed(name string) []string {
	var out []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}
