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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// Sessions on a profile with network mode "allow": each session has its
// own egress proxy for its life, each cell's Execution says that cell's
// attempts (egress), and the audit line and sbx_egress_attempts_total
// count them as they do a one-shot run's.

// egressProfile writes a profile that allows only the test server at
// 127.0.0.1:port (a loopback literal must be listed to be reached, as in
// TestNetworkSpecialAddresses), in a directory r's uid owns.
func egressProfile(t *testing.T, r runner, port string) string {
	t.Helper()
	prof := filepath.Join(ownedDir(t, r), "egress.toml")
	body := fmt.Sprintf("description = \"tests: a session's egress\"\nextends = \"standard\"\n\n[network]\nmode = \"allow\"\nallow = [\"127.0.0.1:%s\"]\n", port)
	if err := os.WriteFile(prof, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return prof
}

// egressGet defines get(url) in the session: a GET through the proxy
// the environment names, with http.client (urllib would honour NO_PROXY,
// which keeps 127.0.0.1 inside the sandbox), giving the status.
const egressGet = `import http.client, os, urllib.parse
def get(url):
    p = urllib.parse.urlsplit(os.environ["http_proxy"])
    c = http.client.HTTPConnection(p.hostname, p.port, timeout=10)
    try:
        c.request("GET", url)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()
`

// serverState is what /metrics says of the server: its fds and
// goroutines (the session's proxy must leave none behind), and the
// egress counter by decision.
type serverState struct {
	fds, goroutines, sessions float64
	egress                    map[string]float64
}

// baseState is the server's state at rest before a session: its fds and
// goroutines as the least of 10 scrapes (the egress counts of the
// first). A scrape counts goroutines of its own (its connection's
// background read, the registry's collect workers, as many as its
// scheduling started), so one scrape can read 1-4 off the next with
// nothing changed (200 scrapes of an idle server: 8 to 12).
func baseState(t *testing.T, s *server) serverState {
	t.Helper()
	base := scrapeState(t, s)
	for i := 0; i < 9; i++ {
		time.Sleep(20 * time.Millisecond)
		st := scrapeState(t, s)
		base.fds, base.goroutines = min(base.fds, st.fds), min(base.goroutines, st.goroutines)
	}
	return base
}

func scrapeState(t *testing.T, s *server) serverState {
	t.Helper()
	resp := s.do("GET", "/metrics", nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	st := serverState{egress: map[string]float64{}}
	if f := fams["process_open_fds"]; f != nil && len(f.Metric) == 1 {
		st.fds = f.Metric[0].GetGauge().GetValue()
	}
	if f := fams["go_goroutines"]; f != nil && len(f.Metric) == 1 {
		st.goroutines = f.Metric[0].GetGauge().GetValue()
	}
	if f := fams["sbx_sessions_active"]; f != nil && len(f.Metric) == 1 {
		st.sessions = f.Metric[0].GetGauge().GetValue()
	}
	if f := fams["sbx_egress_attempts_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "decision" {
					st.egress[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if st.fds == 0 || st.goroutines == 0 {
		t.Fatalf("/metrics has no process_open_fds or go_goroutines:\n%.2000s", b)
	}
	return st
}

// scrapeSlack is how many goroutines a scrape may count above base with
// nothing left: under load the same idle server's least count moved by 2
// from before a session to after it, for 30 s of polls (three CI and
// local failures, 1 in ~25 runs at load; a goroutine dump of the server
// taken then held no goroutine of the session, its proxy or its sandbox:
// only main, the signal loop, the accept loop and the scrape's own). A
// session with egress runs ~14 goroutines (6 -> 20): a proxy or a
// session left behind leaves more than the slack, and its sockets, which
// the fds (exact) and the connections to the host (exact) catch.
const scrapeSlack = 2

// checkBackToRest waits (30s at most) until the server holds no more fds
// than at base, no more goroutines than base's and scrapeSlack, and no
// connection to the allowed host (port p) is open, then checks that, and
// that no cgroup of the sessions ids is left, after what ended them. It
// returns the server's state.
func checkBackToRest(t *testing.T, s *server, base serverState, p, after string, ids ...string) serverState {
	t.Helper()
	var rest serverState
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rest = scrapeState(t, s)
		if (rest.fds <= base.fds && rest.goroutines <= base.goroutines+scrapeSlack && established(t, p) == 0) || time.Now().After(deadline) {
			break
		}
	}
	if rest.fds > base.fds || rest.goroutines > base.goroutines+scrapeSlack {
		t.Errorf("not back to rest after %s: fds %v (was %v), goroutines %v (was %v, %d more allowed)", after, rest.fds, base.fds, rest.goroutines, base.goroutines, scrapeSlack)
	}
	if n := established(t, p); n > 0 {
		t.Errorf("%d connections to the allowed host left after %s", n, after)
	}
	for _, id := range ids {
		if cg := cgroupsNamed("sbx-" + id); len(cg) > 0 {
			t.Errorf("cgroups of session %s left: %v", id, cg)
		}
	}
	return rest
}

// checkEgress checks that ex lists exactly one attempt, to host, allowed
// or not, and that its summary counts it.
func checkEgress(t *testing.T, what string, ex *nsjail.Execution, host string, allowed bool) {
	t.Helper()
	eg := ex.Egress
	if eg == nil {
		t.Errorf("%s: no egress in the Execution: %+v", what, ex)
		return
	}
	refused := 0
	if !allowed {
		refused = 1
	}
	if len(eg.Attempts) != 1 || eg.Attempts[0].Host != host || eg.Attempts[0].Allowed != allowed || eg.Open != 0 || eg.Truncated ||
		eg.Summary.Attempts != 1 || eg.Summary.Recorded != 1 || eg.Summary.Refused != refused {
		t.Errorf("%s: egress %+v, want one attempt to %s, allowed %v", what, eg, host, allowed)
	}
	if !allowed && eg.Attempts[0].Reason == "" {
		t.Errorf("%s: a refused attempt without its reason: %+v", what, eg.Attempts[0])
	}
}

// TestSessionEgress: a cell fetches the allowed host (200), the next one
// a denied one (403 from the proxy); each Execution lists its own
// attempt, the audit lines and sbx_egress_attempts_total count them, a
// restart keeps the proxy, and after DELETE the server's fds and
// goroutines are back where they were, with no connection to the host
// left.
func TestSessionEgress(t *testing.T) {
	plain, _, _ := hostServer(t, false)
	p := port(plain)
	forEach(t, func(t *testing.T, r runner) {
		prof := egressProfile(t, r, p)
		log := filepath.Join(ownedDir(t, r), "audit.jsonl")
		s := startServe(t, r, "", "--profiles", "standard,"+prof, "--audit-log", log)
		allowed := "http://127.0.0.1:" + p + "/"

		// Warm up: one session's worth, so that the baseline has the
		// server's lazily made buffers and pools.
		warm := s.newSession(map[string]any{"profile": prof})
		s.cell(warm, egressGet+"get("+fmt.Sprintf("%q", allowed)+")")
		s.do("DELETE", "/v1/sessions/"+warm, nil).Body.Close()
		time.Sleep(time.Second)
		base := baseState(t, s)

		id := s.newSession(map[string]any{"profile": prof, "ttl": "10m"})
		if ex := s.cell(id, egressGet); ex.Status != nsjail.ExecOK || ex.Egress == nil || len(ex.Egress.Attempts) != 0 || ex.Egress.Summary.Attempts != 0 {
			t.Errorf("a cell without connections: %+v", ex)
		}
		ex := s.cell(id, "get("+fmt.Sprintf("%q", allowed)+")")
		if ex.Status != nsjail.ExecOK || mainText(ex) != "200" {
			t.Fatalf("the allowed host: %s %q %q %+v\nserver:\n%s", ex.Status, mainText(ex), ex.Stderr, ex.Error, s.stderr)
		}
		checkEgress(t, "cell 2 (allowed)", ex, "127.0.0.1", true)
		// The audit lines' ids are SESSION/N; N as the Executions say.
		want := map[string]string{fmt.Sprint(ex.ExecutionCount): "127.0.0.1 true"}
		ex = s.cell(id, `get("http://denied.test/")`)
		if ex.Status != nsjail.ExecOK || mainText(ex) != "403" {
			t.Fatalf("the denied host: %s %q %q %+v", ex.Status, mainText(ex), ex.Stderr, ex.Error)
		}
		checkEgress(t, "cell 3 (denied)", ex, "denied.test", false)
		want[fmt.Sprint(ex.ExecutionCount)] = "denied.test false"

		// A restart is a new interpreter in the same sandbox: the
		// proxy stays, and counts from where it was.
		resp := s.do("POST", "/v1/sessions/"+id+"/restart", nil)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("restart: %s", resp.Status)
		}
		// Streamed, the end line's Execution says the same.
		resp = s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": egressGet + `get("http://denied.test/again")`}, "Accept", "application/x-ndjson")
		var end *nsjail.Execution
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type      string            `json:"type"`
				Execution *nsjail.Execution `json:"execution"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "end" {
				end = ev.Execution
			}
		}
		resp.Body.Close()
		if end == nil || mainText(end) != "403" {
			t.Fatalf("streamed cell after the restart: %+v", end)
		}
		checkEgress(t, "cell 4 (streamed, after the restart)", end, "denied.test", false)
		want[fmt.Sprint(end.ExecutionCount)] = "denied.test false"

		after := scrapeState(t, s)
		if d := after.egress["allowed"] - base.egress["allowed"]; d != 1 {
			t.Errorf(`sbx_egress_attempts_total{decision="allowed"} moved by %v, want 1`, d)
		}
		if d := after.egress["refused"] - base.egress["refused"]; d != 2 {
			t.Errorf(`sbx_egress_attempts_total{decision="refused"} moved by %v, want 2`, d)
		}

		// The audit lines of the session's cells: each with its own.
		b, _ := os.ReadFile(log)
		byID := map[string]struct {
			Network []struct {
				Host    string `json:"host"`
				Allowed bool   `json:"allowed"`
			} `json:"network"`
			NetworkSummary *struct {
				Attempts int `json:"attempts"`
				Refused  int `json:"refused"`
			} `json:"network_summary"`
		}{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e struct {
				ID string `json:"id"`
			}
			json.Unmarshal([]byte(line), &e)
			v := byID[e.ID]
			json.Unmarshal([]byte(line), &v)
			byID[e.ID] = v
		}
		if len(want) != 3 {
			t.Errorf("the three cells' execution counts are not distinct: %v", want)
		}
		for cell, w := range want {
			e, ok := byID[id+"/"+cell]
			if !ok || len(e.Network) != 1 || fmt.Sprintf("%s %v", e.Network[0].Host, e.Network[0].Allowed) != w || e.NetworkSummary == nil || e.NetworkSummary.Attempts != 1 {
				t.Errorf("audit line of cell %s: %+v, want one attempt: %s\n%s", cell, e, w, b)
			}
		}

		// DELETE: the sandbox goes, and its proxy with it.
		resp = s.do("DELETE", "/v1/sessions/"+id, nil)
		resp.Body.Close()
		if resp.StatusCode != 204 {
			t.Fatalf("DELETE: %s", resp.Status)
		}
		rest := checkBackToRest(t, s, base, p, "DELETE", id)
		t.Logf("fds %v -> %v (session open) -> %v, goroutines %v -> %v -> %v", base.fds, after.fds, rest.fds, base.goroutines, after.goroutines, rest.goroutines)
	})
}

// TestSessionEgressPool: --session-pool warms sessions of a networked
// profile, each with a proxy of its own: two pooled sessions never see
// each other's attempts, and the drain leaves nothing of either.
func TestSessionEgressPool(t *testing.T) {
	plain, _, _ := hostServer(t, false)
	p := port(plain)
	forEach(t, func(t *testing.T, r runner) {
		prof := egressProfile(t, r, p)
		s := startServe(t, r, "", "--profiles", "standard,"+prof, "--session-pool", prof+"=1")
		claim := func() string {
			t.Helper()
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
				resp := s.do("POST", "/v1/sessions", map[string]any{"profile": prof})
				var info struct {
					ID     string `json:"id"`
					Pooled bool   `json:"pooled"`
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				json.Unmarshal(b, &info)
				if resp.StatusCode != 201 {
					t.Fatalf("POST /v1/sessions: %s: %s\nserver:\n%s", resp.Status, b, s.stderr)
				}
				if info.Pooled {
					return info.ID
				}
				s.do("DELETE", "/v1/sessions/"+info.ID, nil).Body.Close()
			}
			t.Fatalf("no pooled session within 60s:\n%s", s.stderr)
			return ""
		}
		a := claim()
		ex := s.cell(a, egressGet+"get("+fmt.Sprintf("%q", "http://127.0.0.1:"+p+"/")+")")
		if mainText(ex) != "200" {
			t.Fatalf("pooled session a, the allowed host: %+v", ex)
		}
		checkEgress(t, "pooled session a", ex, "127.0.0.1", true)
		b := claim()
		if b == a {
			t.Fatalf("the same session twice: %s", a)
		}
		ex = s.cell(b, egressGet+`get("http://denied.test/")`)
		if mainText(ex) != "403" {
			t.Fatalf("pooled session b, the denied host: %+v", ex)
		}
		// b's proxy saw b's attempt only: none of a's.
		checkEgress(t, "pooled session b", ex, "denied.test", false)
		ex = s.cell(a, "1")
		if ex.Egress == nil || len(ex.Egress.Attempts) != 0 {
			t.Errorf("session a's next cell lists attempts it did not make: %+v", ex.Egress)
		}
		pid := s.cmd.Process.Pid
		if err := s.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if c := childrenOf(pid); len(c) > 0 {
			t.Errorf("processes left after the drain: %v", c)
		}
		for _, id := range []string{a, b} {
			if cg := cgroupsNamed("sbx-" + id); len(cg) > 0 {
				t.Errorf("cgroups of session %s left: %v", id, cg)
			}
		}
		if n := established(t, p); n > 0 {
			t.Errorf("%d connections to the allowed host left after the drain", n)
		}
	})
}

// egressTunnel opens a CONNECT tunnel through the proxy to the allowed
// host and keeps it in the global t (a client's kept-alive connection).
const egressTunnel = `import socket
t = socket.create_connection(("127.0.0.1", 3128))
t.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
t.recv(100).split(b"\r\n")[0].decode()
`

// TestSessionEgressHeldConnections: a connection a cell leaves open is
// counted open in its Execution and listed with the cell during which it
// ends; an interpreter killed after the grace (state_lost) and a session
// ended by its idle timeout leave no connection, fd or goroutine of the
// proxy behind.
func TestSessionEgressHeldConnections(t *testing.T) {
	plain, _, _ := hostServer(t, false)
	p := port(plain)
	tunnel := fmt.Sprintf(egressTunnel, p)
	forEach(t, func(t *testing.T, r runner) {
		prof := egressProfile(t, r, p)
		s := startServe(t, r, "", "--profiles", "standard,"+prof)
		warm := s.newSession(map[string]any{"profile": prof})
		s.cell(warm, tunnel)
		s.do("DELETE", "/v1/sessions/"+warm, nil).Body.Close()
		time.Sleep(time.Second)
		base := baseState(t, s)

		id := s.newSession(map[string]any{"profile": prof})
		ex := s.cell(id, tunnel)
		if !strings.Contains(mainText(ex), " 200 ") || ex.Egress == nil || ex.Egress.Open != 1 || len(ex.Egress.Attempts) != 0 {
			t.Fatalf("a cell that keeps a tunnel open: %q %+v, want 200 and one open, none listed", mainText(ex), ex.Egress)
		}
		ex = s.cell(id, "t.close()")
		if eg := ex.Egress; eg == nil || eg.Open != 0 || len(eg.Attempts) != 1 || eg.Attempts[0].Method != "CONNECT" || !eg.Attempts[0].Allowed {
			t.Errorf("the cell that closes it: %+v, want the tunnel listed", ex.Egress)
		}

		// A tunnel held by an interpreter that ignores SIGINT: killed
		// after the grace, its connection ends with it.
		ex = s.cell(id, tunnel+"import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(1)", "timeout", "1s")
		if ex.Status != nsjail.ExecTimeout || !ex.StateLost {
			t.Fatalf("a cell ignoring SIGINT: %+v, want timeout with state_lost", ex)
		}
		listed := 0
		if ex.Egress != nil {
			listed = len(ex.Egress.Attempts)
		}
		next := s.cell(id, "1")
		if next.Egress == nil || next.Egress.Open != 0 || listed+len(next.Egress.Attempts) != 1 {
			t.Errorf("the killed interpreter's tunnel: %+v then %+v, want it listed once and nothing open", ex.Egress, next.Egress)
		}
		for deadline := time.Now().Add(10 * time.Second); established(t, p) > 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if n := established(t, p); n > 0 {
			t.Errorf("%d connections to the host left after the kill", n)
		}
		s.do("DELETE", "/v1/sessions/"+id, nil).Body.Close()

		// The idle timeout ends a session that holds a tunnel (watched
		// through /metrics: a request to the session would keep it).
		idle := s.newSession(map[string]any{"profile": prof, "idle_timeout": "2s"})
		s.cell(idle, tunnel)
		gone := false
		for deadline := time.Now().Add(60 * time.Second); !gone && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			gone = scrapeState(t, s).sessions == 0
		}
		if !gone {
			t.Fatalf("the idle session did not end within 60s")
		}
		checkBackToRest(t, s, base, p, "the kill and the idle end", id, idle)
	})
}

// TestReplEgress: `sbx repl` on a networked profile reaches the allowed
// host through its session's proxy, and shows a refused attempt after
// the cell that made it.
func TestReplEgress(t *testing.T) {
	plain, _, _ := hostServer(t, false)
	p := port(plain)
	forEach(t, func(t *testing.T, r runner) {
		prof := egressProfile(t, r, p)
		in := egressGet + "\nget(\"http://127.0.0.1:" + p + "/\")\nget(\"http://denied.test/\")\n"
		out := r.exec(t, in, "repl", "--profile", prof)
		if out.code != 0 || out.stdout != "200\n403\n" {
			t.Errorf("sbx repl: exit %d, stdout %q, stderr %q", out.code, out.stdout, out.stderr)
		}
		if strings.Count(out.stderr, "[sbx: egress refused: ") != 1 || !strings.Contains(out.stderr, "[sbx: egress refused: denied.test:80: ") {
			t.Errorf("sbx repl's stderr: %q, want the one refusal shown", out.stderr)
		}
	})
}

// TestSessionEgressCellsKeptApart: a cell that leaves a tunnel open has
// its egress taken after a grace; a next cell sent meanwhile is busy
// (409) and its attempts never land in the first cell's Execution.
func TestSessionEgressCellsKeptApart(t *testing.T) {
	plain, _, _ := hostServer(t, false)
	p := port(plain)
	forEach(t, func(t *testing.T, r runner) {
		prof := egressProfile(t, r, p)
		s := startServe(t, r, "", "--profiles", "standard,"+prof)
		id := s.newSession(map[string]any{"profile": prof})
		s.cell(id, egressGet)
		resp := s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": fmt.Sprintf(egressTunnel, p)}, "Accept", "application/x-ndjson")
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var first *nsjail.Execution
		second := make(chan *http.Response, 1)
		for sc.Scan() {
			var ev struct {
				Type      string            `json:"type"`
				Execution *nsjail.Execution `json:"execution"`
			}
			json.Unmarshal(sc.Bytes(), &ev)
			switch ev.Type {
			case "result":
				// The cell is over; its egress is taken within the
				// grace, since its tunnel stays open.
				go func() {
					time.Sleep(100 * time.Millisecond)
					second <- s.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"code": `get("http://denied.test/")`})
				}()
			case "end":
				first = ev.Execution
			}
		}
		if first == nil || first.Egress == nil {
			t.Fatalf("no end line with egress: %+v", first)
		}
		for _, a := range first.Egress.Attempts {
			if a.Host == "denied.test" {
				t.Errorf("the next cell's attempt is in the first cell's Execution: %+v", first.Egress)
			}
		}
		r2 := <-second
		b, _ := io.ReadAll(r2.Body)
		r2.Body.Close()
		switch r2.StatusCode {
		case 409:
		case 200:
			var ex nsjail.Execution
			json.Unmarshal(b, &ex)
			if ex.Egress == nil || len(ex.Egress.Attempts) != 1 || ex.Egress.Attempts[0].Host != "denied.test" {
				t.Errorf("the second cell ran but does not list its own attempt: %s", b)
			}
		default:
			t.Errorf("the second cell: %s: %s", r2.Status, b)
		}
	})
}
