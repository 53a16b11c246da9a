//go:build integration

package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// The ops tests drive a real `sbx serve` on 127.0.0.1 over HTTP only:
// /metrics, the circuit breaker, async jobs, the OpenAPI document and a
// soak. Their helpers are prefixed ops so as not to collide with the
// serve tests'.

// opsTokens are the bearer tokens every ops server accepts, by name.
var opsTokens = map[string]string{"agent-a": "aaaaaaaaaaaaaaaaaaaaaaaa", "agent-b": "bbbbbbbbbbbbbbbbbbbbbbbb"}

// opsServer is one `sbx serve` an ops test started.
type opsServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	tmp    string // the server's TMPDIR
	dir    string // its files (token file, audit log)
	stderr *lockedBuffer
	exited chan error
	// client never keeps a connection alive, so that the server's fds
	// and goroutines at rest do not depend on the test's idle ones.
	client *http.Client
}

// opsAudit, as an argument of startOps, is replaced by the path of an
// audit log in the server's directory.
const opsAudit = "@AUDIT@"

// startOps starts `sbx serve --listen 127.0.0.1:0 --token-file F ARGS`
// as r and waits for its "listening on" line; it is drained at the end.
func startOps(t *testing.T, r runner, args ...string) *opsServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbx-ops-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	var tokens strings.Builder
	for name, secret := range opsTokens {
		fmt.Fprintf(&tokens, "%s:%s\n", name, secret)
	}
	tf := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tf, []byte(tokens.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, tmp, tf} {
		if err := os.Chown(p, r.uid, r.uid); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range args {
		if a == opsAudit {
			args[i] = filepath.Join(dir, "audit.jsonl")
		}
	}
	cmd := r.command(append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tf}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	s := &opsServer{t: t, cmd: cmd, tmp: tmp, dir: dir, stderr: &lockedBuffer{}, exited: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	s.base = "http://" + startListening(t, cmd, s.stderr, s.exited)
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// stop drains the server (SIGTERM) and waits for it to exit 0; it is
// killed by pid if it does not exit in time.
func (s *opsServer) stop() error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			return fmt.Errorf("sbx serve after SIGTERM: %v\n%s", err, s.stderr)
		}
		return nil
	case <-time.After(90 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("sbx serve did not exit within 90s of SIGTERM:\n%s", s.stderr)
	}
}

// call sends one request as token ("" for none) and reads the answer.
// body is JSON-encoded unless it is a string.
func (s *opsServer) call(method, path, token string, body any, hdr ...string) (*http.Response, []byte) {
	s.t.Helper()
	resp := s.open(method, path, token, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp, b
}

// open is call without reading the body (streams).
func (s *opsServer) open(method, path, token string, body any, hdr ...string) *http.Response {
	s.t.Helper()
	var rd io.Reader
	if b, ok := body.(string); ok {
		rd = strings.NewReader(b)
	} else if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+opsTokens[token])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v\nserver:\n%s", method, path, err, s.stderr)
	}
	return resp
}

// opsResult is POST /v1/exec's 200 and a job's result.
type opsResult struct {
	nsjail.Result
	RequestID string            `json:"request_id"`
	Outputs   []json.RawMessage `json:"outputs"`
}

// run posts body to /v1/exec as token and decodes the Result strictly.
func (s *opsServer) run(token string, body any, hdr ...string) *opsResult {
	s.t.Helper()
	resp, b := s.call("POST", "/v1/exec", token, body, hdr...)
	if resp.StatusCode != 200 {
		s.t.Fatalf("POST /v1/exec %v: %s: %s", body, resp.Status, b)
	}
	return decodeOpsResult(s.t, b)
}

func decodeOpsResult(t *testing.T, b []byte) *opsResult {
	t.Helper()
	res, err := parseOpsResult(b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// parseOpsResult decodes a Result strictly: an unknown field is an error.
func parseOpsResult(b []byte) (*opsResult, error) {
	var res opsResult
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("bad Result (%v): %.500s", err, b)
	}
	return &res, nil
}

// try is call for a worker goroutine, which must not t.Fatal: a failure
// is an error.
func (s *opsServer) try(method, path, token string, body any, hdr ...string) (int, []byte, error) {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.base+path, bytes.NewReader(j))
	if body == nil {
		req, _ = http.NewRequest(method, s.base+path, nil)
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+opsTokens[token])
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, b, fmt.Errorf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// metrics scrapes /metrics: each sample by name{label="value",...}, labels
// sorted; a histogram gives name_count and name_sum.
func (s *opsServer) metrics() map[string]float64 {
	s.t.Helper()
	resp, b := s.call("GET", "/metrics", "agent-a", nil)
	if resp.StatusCode != 200 {
		s.t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("/metrics does not parse: %v\n%s", err, b)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			key := name + labelsOf(m)
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelsOf(m)] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"+labelsOf(m)] = m.Histogram.GetSampleSum()
			case m.Untyped != nil:
				out[key] = m.Untyped.GetValue()
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	var l []string
	for _, p := range m.Label {
		l = append(l, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	sort.Strings(l)
	return "{" + strings.Join(l, ",") + "}"
}

// spin is a payload that burns CPU until a limit ends it.
const spin = "while True: pass"

// TestOpsMetrics: /metrics moves as runs happen, by profile and status,
// with no id among its labels, and asks for the token.
func TestOpsMetrics(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startOps(t, r, "--breaker-kills", "-1")
		if resp, _ := s.call("GET", "/metrics", "", nil); resp.StatusCode != 401 {
			t.Errorf("/metrics without a token: %s, want 401", resp.Status)
		}
		before := s.metrics()
		for _, name := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes", "sbx_exec_running", "sbx_queue_depth"} {
			if _, ok := before[name]; !ok {
				t.Errorf("%s missing from /metrics", name)
			}
		}
		info := false
		for k, v := range before {
			info = info || (strings.HasPrefix(k, "sbx_build_info{") && strings.Contains(k, `commit=`) && v == 1)
		}
		if !info {
			t.Errorf("no sbx_build_info{...} 1")
		}
		if res := s.run("agent-a", map[string]any{"code": "print(1)"}); res.Status != nsjail.StatusOK || res.Stdout != "1\n" {
			t.Fatalf("print(1): %s %q", res.Status, res.Stdout)
		}
		if res := s.run("agent-a", map[string]any{"code": "raise SystemExit(3)", "profile": "strict"}); res.Status != nsjail.StatusExit {
			t.Fatalf("exit 3: %s", res.Status)
		}
		killed := s.run("agent-b", map[string]any{"code": spin, "limits": map[string]any{"wall_time": "1s"}})
		limit := map[nsjail.Status]string{nsjail.StatusTimeout: "wall_time", nsjail.StatusCPULimit: "cpu_time"}[killed.Status]
		if limit == "" {
			t.Fatalf("a spin under wall_time 1s: %s (%s), want timeout or cpu_limit", killed.Status, killed.Message)
		}
		after := s.metrics()
		moved := func(key string, want float64) {
			t.Helper()
			if got := after[key] - before[key]; got != want {
				t.Errorf("%s moved by %v, want %v", key, got, want)
			}
		}
		moved(`sbx_exec_total{profile="standard",status="ok"}`, 1)
		moved(`sbx_exec_total{profile="strict",status="exit"}`, 1)
		moved(fmt.Sprintf(`sbx_exec_total{profile="standard",status=%q}`, killed.Status), 1)
		moved(`sbx_exec_duration_seconds_count{profile="standard"}`, 2)
		moved(`sbx_exec_duration_seconds_count{profile="strict"}`, 1)
		moved(`sbx_exec_queue_wait_seconds_count`, 3)
		moved(fmt.Sprintf(`sbx_limit_kills_total{limit=%q}`, limit), 1)
		if got := after[`sbx_exec_duration_seconds_sum{profile="standard"}`] - before[`sbx_exec_duration_seconds_sum{profile="standard"}`]; got < 0.9 {
			t.Errorf("sbx_exec_duration_seconds_sum moved by %v, want at least the 1s spin", got)
		}
		if after["sbx_exec_running"] != 0 || after["sbx_queue_depth"] != 0 {
			t.Errorf("at rest: running %v, queue %v", after["sbx_exec_running"], after["sbx_queue_depth"])
		}
		// A running run is seen as one.
		resp := s.open("POST", "/v1/exec", "agent-a", map[string]any{"code": "import time; print('up', flush=True); time.sleep(60)", "limits": map[string]any{"wall_time": "3s"}}, "Accept", "application/x-ndjson")
		line, err := readLine(resp.Body)
		if err != nil || !strings.Contains(line, `"stdout"`) {
			t.Fatalf("the long run did not start: %q %v", line, err)
		}
		if m := s.metrics(); m["sbx_exec_running"] != 1 {
			t.Errorf("sbx_exec_running %v during a run, want 1", m["sbx_exec_running"])
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for k := range after {
			if strings.HasPrefix(k, "sbx_") && strings.Contains(k, killed.ID) {
				t.Errorf("a run's id in a metric: %s", k)
			}
		}
	})
}

// TestOpsSessionMetrics: the session metrics are in /metrics (client_golang,
// ops's registry) and move as sessions open, run cells and end: deleted,
// and by their idle timeout.
func TestOpsSessionMetrics(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startOps(t, r)
		newSession := func(body map[string]any) string {
			t.Helper()
			resp, b := s.call("POST", "/v1/sessions", "agent-a", body)
			var sr struct{ ID string }
			if resp.StatusCode != 201 || json.Unmarshal(b, &sr) != nil || sr.ID == "" {
				t.Fatalf("POST /v1/sessions: %s: %s\nserver:\n%s", resp.Status, b, s.stderr)
			}
			return sr.ID
		}
		cell := func(id, code string) string {
			t.Helper()
			resp, b := s.call("POST", "/v1/sessions/"+id+"/exec", "agent-a", map[string]any{"code": code})
			var ex nsjail.Execution
			if resp.StatusCode != 200 || json.Unmarshal(b, &ex) != nil {
				t.Fatalf("exec %q: %s: %s", code, resp.Status, b)
			}
			return string(ex.Status)
		}
		before := s.metrics()
		if _, ok := before["sbx_sessions_active"]; !ok {
			t.Fatalf("sbx_sessions_active missing from /metrics")
		}
		id := newSession(map[string]any{"profile": "standard", "ttl": "10m"})
		if st := cell(id, "x = 1"); st != "ok" {
			t.Errorf("x = 1: %s", st)
		}
		if st := cell(id, "1/0"); st != "error" {
			t.Errorf("1/0: %s", st)
		}
		if m := s.metrics(); m["sbx_sessions_active"]-before["sbx_sessions_active"] != 1 {
			t.Errorf("sbx_sessions_active %v with one session open (before %v)", m["sbx_sessions_active"], before["sbx_sessions_active"])
		}
		if resp, b := s.call("DELETE", "/v1/sessions/"+id, "agent-a", nil); resp.StatusCode != 204 {
			t.Errorf("DELETE the session: %s: %s", resp.Status, b)
		}
		newSession(map[string]any{"idle_timeout": "1s"})
		var after map[string]float64
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if after = s.metrics(); after[`sbx_session_ends_total{reason="idle"}`] > before[`sbx_session_ends_total{reason="idle"}`] {
				break
			}
		}
		moved := func(key string, want float64) {
			t.Helper()
			if got := after[key] - before[key]; got != want {
				t.Errorf("%s moved by %v, want %v", key, got, want)
			}
		}
		moved(`sbx_session_executions_total{status="ok"}`, 1)
		moved(`sbx_session_executions_total{status="error"}`, 1)
		moved(`sbx_session_ends_total{reason="deleted"}`, 1)
		moved(`sbx_session_ends_total{reason="idle"}`, 1)
		moved(`sbx_sessions_active`, 0)
		for k := range after {
			if strings.HasPrefix(k, "sbx_session") && strings.Contains(k, id) {
				t.Errorf("a session's id in a metric: %s", k)
			}
		}
	})
}

// TestOpsBreaker: a token whose runs keep being killed by a CPU limit gets
// 429 (throttled, with Retry-After and why), counted in /metrics; another
// token is not throttled.
func TestOpsBreaker(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startOps(t, r, "--breaker-kills", "2", "--breaker-window", "5m", "--breaker-cooldown", "10m")
		bomb := map[string]any{"code": spin, "limits": map[string]any{"cpu_time": "1s", "wall_time": "30s"}}
		for i := range 2 {
			if res := s.run("agent-a", bomb); res.Status != nsjail.StatusCPULimit {
				t.Fatalf("spin %d under cpu_time 1s: %s (%s), want cpu_limit", i, res.Status, res.Message)
			}
		}
		for _, path := range []string{"/v1/exec", "/v1/jobs"} {
			resp, b := s.call("POST", path, "agent-a", map[string]any{"code": "print(1)"})
			var e struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal(b, &e)
			if resp.StatusCode != 429 || e.Error.Code != "throttled" || resp.Header.Get("Retry-After") == "" ||
				!strings.Contains(e.Error.Message, "killed by a limit") {
				t.Errorf("%s after 2 CPU kills: %s Retry-After %q %s, want 429 throttled", path, resp.Status, resp.Header.Get("Retry-After"), b)
			}
		}
		if res := s.run("agent-b", map[string]any{"code": "print(1)"}); res.Status != nsjail.StatusOK {
			t.Errorf("another token: %s, want ok", res.Status)
		}
		m := s.metrics()
		if m["sbx_breaker_trips_total"] != 1 || m[`sbx_exec_rejected_total{reason="throttled"}`] != 2 || m["sbx_breaker_open"] != 1 {
			t.Errorf("breaker metrics: trips %v, rejected %v, open %v; want 1, 2, 1", m["sbx_breaker_trips_total"], m[`sbx_exec_rejected_total{reason="throttled"}`], m["sbx_breaker_open"])
		}
	})
}

// opsJob is GET /v1/jobs/{id}'s body.
type opsJob struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	CreatedAt     time.Time       `json:"created_at"`
	StartedAt     *time.Time      `json:"started_at"`
	FinishedAt    *time.Time      `json:"finished_at"`
	EventsDropped int64           `json:"events_dropped_bytes"`
	Result        json.RawMessage `json:"result"`
	Error         json.RawMessage `json:"error"`
}

func (s *opsServer) postJob(token string, body any) opsJob {
	s.t.Helper()
	resp, b := s.call("POST", "/v1/jobs", token, body)
	if resp.StatusCode != 202 {
		s.t.Fatalf("POST /v1/jobs: %s: %s", resp.Status, b)
	}
	var j opsJob
	// The 202 is the job as accepted: queued, whatever it is by now.
	if err := json.Unmarshal(b, &j); err != nil || j.ID == "" || j.Status != "queued" || resp.Header.Get("Location") != "/v1/jobs/"+j.ID {
		s.t.Fatalf("POST /v1/jobs: %v %s (Location %q)", err, b, resp.Header.Get("Location"))
	}
	return j
}

func (s *opsServer) getJob(token, id string) (int, opsJob) {
	s.t.Helper()
	resp, b := s.call("GET", "/v1/jobs/"+id, token, nil)
	var j opsJob
	if resp.StatusCode == 200 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			s.t.Fatalf("GET /v1/jobs/%s: %v: %s", id, err, b)
		}
	}
	return resp.StatusCode, j
}

// pollJob polls the job until its status is one of want.
func (s *opsServer) pollJob(token, id string, want ...string) opsJob {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, j := s.getJob(token, id)
		if code != 200 {
			s.t.Fatalf("GET /v1/jobs/%s: %d", id, code)
		}
		for _, w := range want {
			if j.Status == w {
				return j
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("job %s still %s after 90s, want %v", id, j.Status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// opsEvent is one line of an events stream, and when it was read.
type opsEvent struct {
	Type   string          `json:"type"`
	Data   string          `json:"data"`
	TMS    int64           `json:"t_ms"`
	Result json.RawMessage `json:"result"`
	at     time.Time
}

// events reads a job's whole events stream.
func (s *opsServer) events(token, id string) []opsEvent {
	s.t.Helper()
	resp := s.open("GET", "/v1/jobs/"+id+"/events", token, nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("GET /v1/jobs/%s/events: %s %s", id, resp.Status, b)
	}
	var out []opsEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e opsEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			s.t.Fatalf("event %q: %v", sc.Text(), err)
		}
		e.at = time.Now()
		out = append(out, e)
	}
	return out
}

// stdoutOf is the data of a stream's stdout events.
func stdoutOf(ev []opsEvent) string {
	var b strings.Builder
	for _, e := range ev {
		if e.Type == "stdout" {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

// showEvents prints events for a failure, results by their status.
func showEvents(ev []opsEvent) string {
	var out []string
	for _, e := range ev {
		d := fmt.Sprintf("%q", e.Data)
		if e.Type == "result" {
			var r struct{ Status, Message string }
			json.Unmarshal(e.Result, &r)
			d = r.Status + " (" + r.Message + ")"
		}
		out = append(out, fmt.Sprintf("%s@%dms %s", e.Type, e.TMS, d))
	}
	return strings.Join(out, "; ")
}

// TestOpsJobs: a job can be polled, streamed (live, then replayed from the
// start), and cancelled; it is its token's only, and drained on SIGTERM.
func TestOpsJobs(t *testing.T) {
	forEachParallel(t, func(t *testing.T, r runner) {
		s := startOps(t, r, "--audit-log", opsAudit, "--drain-timeout", "60s")
		// Polled: queued or running, then done with the Result.
		j := s.postJob("agent-a", map[string]any{"code": "import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two')", "metadata": map[string]any{"step": 7}})
		live := s.events("agent-a", j.ID)
		done := s.pollJob("agent-a", j.ID, "done")
		if done.StartedAt == nil || done.FinishedAt == nil || done.FinishedAt.Before(*done.StartedAt) {
			t.Errorf("done job times: %+v", done)
		}
		res := decodeOpsResult(t, done.Result)
		if res.Status != nsjail.StatusOK || res.Stdout != "one\ntwo\n" || res.RequestID != j.ID {
			t.Errorf("the job's Result: %s %q request_id %q (job %s)", res.Status, res.Stdout, res.RequestID, j.ID)
		}
		// Streamed: "one" came live, well before the result (print may
		// write its text and its newline apart: two events).
		if len(live) < 2 || live[0].Type != "stdout" || !strings.HasPrefix(live[0].Data, "one") || live[len(live)-1].Type != "result" || stdoutOf(live) != "one\ntwo\n" {
			t.Fatalf("live events: %s", showEvents(live))
		}
		if gap := live[len(live)-1].at.Sub(live[0].at); gap < 700*time.Millisecond {
			t.Errorf("the first event came %v before the result: not live", gap)
		}
		// Replayed from the start once done: the same events.
		replay := s.events("agent-a", j.ID)
		if len(replay) != len(live) {
			t.Fatalf("replay: %d events, live %d", len(replay), len(live))
		}
		for i := range replay {
			if replay[i].Type != live[i].Type || replay[i].Data != live[i].Data || replay[i].TMS != live[i].TMS {
				t.Errorf("replay event %d %s, live %s", i, showEvents(replay[i:i+1]), showEvents(live[i:i+1]))
			}
		}
		// Another token's job is not there; nor is an unknown one.
		if code, _ := s.getJob("agent-b", j.ID); code != 404 {
			t.Errorf("another token's job: %d, want 404", code)
		}
		if code, _ := s.getJob("agent-a", "0123456789abcdef01234567"); code != 404 {
			t.Errorf("an unknown job: %d, want 404", code)
		}
		if resp, _ := s.call("GET", "/v1/jobs/"+j.ID, "", nil); resp.StatusCode != 401 {
			t.Errorf("a job without a token: %s, want 401", resp.Status)
		}
		// A bad request is a 400 at once, not a failed job.
		if resp, b := s.call("POST", "/v1/jobs", "agent-a", map[string]any{"code": "1", "limits": map[string]any{"memory": "1T"}}); resp.StatusCode != 400 || !strings.Contains(string(b), "limits.memory") {
			t.Errorf("a job raising a limit: %s %s, want 400 naming limits.memory", resp.Status, b)
		}
		// What execve(2) would refuse (E2BIG) is refused before the 202.
		if resp, b := s.call("POST", "/v1/jobs", "agent-a", map[string]any{"argv": []string{"python3", "-c", "1", strings.Repeat("x", 200000)}}); resp.StatusCode != 400 || !strings.Contains(string(b), "argv or env") {
			t.Errorf("a job with an argv execve refuses: %s %.200s, want 400", resp.Status, b)
		}

		// Cancelled while it runs: 202, the run is killed at once (not
		// at its 60s), the Result kept with status canceled.
		mark := marker(t)
		defer killMarked(mark)
		long := s.postJob("agent-a", map[string]any{"argv": []string{"python3", "-c", "import time; print('up', flush=True); time.sleep(60)", mark}, "limits": map[string]any{"wall_time": "90s"}})
		// Its events are read live: "up" before the DELETE, the result
		// after it, on one stream.
		stream := s.open("GET", "/v1/jobs/"+long.ID+"/events", "agent-a", nil)
		defer stream.Body.Close()
		if l, err := readLine(stream.Body); err != nil || !strings.Contains(l, `"data":"up`) {
			t.Fatalf("the long job's first event: %q %v", l, err)
		}
		if len(processesWith(mark)) == 0 {
			t.Fatal("the long job's payload is not visible as a process")
		}
		resp, b := s.call("DELETE", "/v1/jobs/"+long.ID, "agent-a", nil)
		if resp.StatusCode != 202 {
			t.Fatalf("DELETE a running job: %s %s, want 202", resp.Status, b)
		}
		rest, _ := io.ReadAll(stream.Body)
		if lines := strings.Split(strings.TrimSpace(string(rest)), "\n"); !strings.HasPrefix(lines[len(lines)-1], `{"type":"result"`) {
			t.Errorf("the cancelled job's live stream ends %.300q", lines[len(lines)-1])
		}
		canceled := s.pollJob("agent-a", long.ID, "canceled")
		cres := decodeOpsResult(t, canceled.Result)
		if cres.Status != nsjail.StatusCanceled || cres.Usage.WallMS > 30_000 || !strings.Contains(strings.Join(cres.Warnings, "\n"), "cancelled") {
			t.Errorf("the cancelled job's Result: %s after %d ms, warnings %q", cres.Status, cres.Usage.WallMS, cres.Warnings)
		}
		if left := processesWith(mark); len(left) > 0 {
			t.Errorf("the cancelled job's payload still runs: %v", left)
		}
		ev := s.events("agent-a", long.ID)
		if len(ev) == 0 || !strings.HasPrefix(stdoutOf(ev), "up") || ev[len(ev)-1].Type != "result" {
			t.Errorf("the cancelled job's events: %s", showEvents(ev))
		}
		// A finished job is removed by DELETE.
		if resp, _ := s.call("DELETE", "/v1/jobs/"+j.ID, "agent-a", nil); resp.StatusCode != 204 {
			t.Errorf("DELETE a done job: %s, want 204", resp.Status)
		}
		if code, _ := s.getJob("agent-a", j.ID); code != 404 {
			t.Errorf("a deleted job: %d, want 404", code)
		}

		// SIGTERM with a job running: it finishes (within the drain
		// timeout), is audited, and sbx exits 0.
		last := s.postJob("agent-b", map[string]any{"code": "import time; time.sleep(2); print('drained')"})
		s.pollJob("agent-b", last.ID, "running")
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		audit, _ := os.ReadFile(filepath.Join(s.dir, "audit.jsonl"))
		var found bool
		for _, l := range strings.Split(string(audit), "\n") {
			var e struct {
				RequestID string          `json:"request_id"`
				Token     string          `json:"token"`
				Status    string          `json:"status"`
				Metadata  json.RawMessage `json:"metadata"`
			}
			json.Unmarshal([]byte(l), &e)
			if e.RequestID == last.ID && e.Token == "agent-b" && e.Status == "ok" {
				found = true
			}
			if e.RequestID == j.ID && string(e.Metadata) != `{"step":7}` {
				t.Errorf("the first job's audit line has metadata %s", e.Metadata)
			}
		}
		if !found {
			t.Errorf("no audit line of ok for the job running at SIGTERM:\n%s\nserver:\n%s", audit, s.stderr)
		}
	})
}
