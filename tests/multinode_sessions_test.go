//go:build integration

package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Session routing through a load balancer (issue 20): the helpers of
// TestDeployMultiNode's session steps, and of the nginx test's.

// answer is one HTTP answer as the session checks see it.
type answer struct {
	status      int
	node, route string // X-Sbx-Node, X-Sbx-Session-Route
	body        []byte
	err         error // no answer: the connection failed or timed out
}

func (a answer) String() string {
	if a.err != nil {
		return "no answer: " + a.err.Error()
	}
	return fmt.Sprintf("%d from %q (route %q): %.300s", a.status, a.node, a.route, a.body)
}

// apiErr is the JSON error of an answer, with a 421's two nodes.
func (a answer) apiErr() (code, message, node string, ok bool) {
	var e struct {
		Error struct{ Code, Message, Node string } `json:"error"`
	}
	if json.Unmarshal(a.body, &e) != nil || e.Error.Code == "" {
		return "", "", "", false
	}
	return e.Error.Code, e.Error.Message, e.Error.Node, true
}

// send is one request to base+path with a client bounded by timeout:
// a hang is an answer with err, never a stuck test.
func send(timeout time.Duration, method, url string, body any, hdr ...string) answer {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, node: resp.Header.Get("X-Sbx-Node"), route: resp.Header.Get("X-Sbx-Session-Route"), body: b, err: err}
}

// lbSession is a session created through a load balancer: its id and
// the node the id names.
type lbSession struct{ id, node string }

// sessionIDNode is the node a session id names: NODE-HEX, HEX 24 hex
// digits (serve/node.go); "" if id is not of the form.
func sessionIDNode(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || len(id)-i-1 != 24 {
		return ""
	}
	return id[:i]
}

// createSessions creates sessions through lb until each of nodes holds
// at least two (at most tries creates): the create is load-balanced, and
// its answer's X-Sbx-Node, X-Sbx-Session-Route and id must all name the
// same node.
func createSessions(t *testing.T, lb string, nodes []string, tries int) []lbSession {
	t.Helper()
	var out []lbSession
	per := map[string]int{}
	for range tries {
		a := send(60*time.Second, "POST", lb+"/v1/sessions", map[string]any{"profile": "standard", "ttl": "30m"})
		var s struct{ ID string }
		if a.err != nil || a.status != 201 || json.Unmarshal(a.body, &s) != nil {
			t.Fatalf("POST /v1/sessions through the load balancer: %v", a)
		}
		node := sessionIDNode(s.ID)
		if node == "" || node != a.node || a.route != a.node {
			t.Fatalf("session %q created by %q with route %q: the id, X-Sbx-Node and X-Sbx-Session-Route must name the same node", s.ID, a.node, a.route)
		}
		out = append(out, lbSession{s.ID, node})
		per[node]++
		all := true
		for _, n := range nodes {
			all = all && per[n] >= 2
		}
		if all {
			break
		}
	}
	for _, n := range nodes {
		if per[n] == 0 {
			t.Fatalf("%d session creates through the load balancer, none on %s: %v", len(out), n, per)
		}
	}
	return out
}

// cells runs the cells of a session through lb, each answer from the
// session's own node: x = 41, then x + 1 is 42, then x = x + 1 and x is
// 42 still: the state lives in one interpreter, the session's.
func cells(lb string, s lbSession, rounds int) (n int, errs []string) {
	codes := []struct{ code, want string }{{"x = 41", ""}, {"print(x + 1)", "42\n"}, {"x = x + 1", ""}, {"print(x)", "42\n"}}
	for i := range rounds * len(codes) {
		c := codes[i%len(codes)]
		if i >= len(codes) && i%len(codes) == 0 {
			c.code = "x = 41" // the next round starts over
		}
		a := send(120*time.Second, "POST", lb+"/v1/sessions/"+s.id+"/exec", map[string]any{"code": c.code})
		n++
		var ex struct{ Status, Stdout string }
		switch {
		case a.err != nil || a.status != 200:
			errs = append(errs, fmt.Sprintf("session %s cell %q: %v", s.id, c.code, a))
		case a.node != s.node || a.route != s.node:
			errs = append(errs, fmt.Sprintf("session %s (of %s) cell %q answered by %q with route %q", s.id, s.node, c.code, a.node, a.route))
		case json.Unmarshal(a.body, &ex) != nil || ex.Status != "ok" || ex.Stdout != c.want:
			errs = append(errs, fmt.Sprintf("session %s cell %q: status %q stdout %q, want ok %q: %.300s", s.id, c.code, ex.Status, ex.Stdout, c.want, a.body))
		}
	}
	return n, errs
}

// checkSessionsStayOnTheirNodes creates sessions through lb and runs
// cells on each from as many goroutines as sessions, all at once.
func checkSessionsStayOnTheirNodes(t *testing.T, lb string, nodes []string, rounds int) []lbSession {
	t.Helper()
	sess := createSessions(t, lb, nodes, 6*len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, per := 0, map[string]int{}
	var errs []string
	for _, s := range sess {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, e := cells(lb, s, rounds)
			mu.Lock()
			total += n
			per[s.node] += n
			errs = append(errs, e...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("sessions: %d created through the load balancer, %d cells, per node %v, %d failed or misrouted", len(sess), total, per, len(errs))
	for _, e := range errs {
		t.Error(e)
	}
	return sess
}

// checkMisdirected: node base (named self) asked directly for a session
// of another node answers 421 naming that node and itself.
func checkMisdirected(t *testing.T, base, self string, s lbSession) {
	t.Helper()
	a := send(60*time.Second, "POST", base+"/v1/sessions/"+s.id+"/exec", map[string]any{"code": "print(x)"})
	code, msg, node, ok := a.apiErr()
	if a.status != 421 || !ok || code != "misdirected" || node != s.node || a.node != self || a.route != s.node ||
		!strings.Contains(msg, s.node) || !strings.Contains(msg, self) {
		t.Errorf("%s asked for %s's session %s: %v, want 421 misdirected naming both", self, s.node, s.id, a)
	}
}

// waitRouted waits until lb sends s's requests to s's node again (a
// restarted node is back in the rotation only after its health checks:
// until then another node answers 421).
func (c *cluster) waitRouted(s lbSession) {
	c.t.Helper()
	c.waitFor(60*time.Second, "the load balancer routes "+s.id+" to "+s.node+" again", func() bool {
		return send(30*time.Second, "GET", c.lb+"/v1/sessions/"+s.id, nil).node == s.node
	})
}

// checkGone: each session of ss, through lb, answers 404 no_session
// from its own node (restarted or drained since: the session is lost).
func checkGone(t *testing.T, lb string, ss []lbSession) {
	t.Helper()
	for _, s := range ss {
		a := send(60*time.Second, "GET", lb+"/v1/sessions/"+s.id, nil)
		if code, _, _, ok := a.apiErr(); a.status != 404 || !ok || code != "no_session" || a.node != s.node {
			t.Errorf("session %s of %s after its node's restart: %v, want 404 no_session from %s", s.id, s.node, a, s.node)
		}
	}
}

// proc is a process as /proc/PID/stat names it: pid and start time, so
// that a pid reused later is not taken for it.
type proc struct {
	pid   int
	start string
}

// procsBelow lists the processes below pid (descendants, soak_test.go)
// with their start times.
func procsBelow(pid int) []proc {
	var out []proc
	for _, p := range descendants(pid) {
		if st := startTime(p); st != "" {
			out = append(out, proc{p, st})
		}
	}
	return out
}

// startTime is field 22 of /proc/PID/stat; "" for no such live process.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

func (p proc) alive() bool { return startTime(p.pid) == p.start }

// sessionCgroups lists the cgroup directories of the sessions ids (a
// session's sandbox cgroup is sbx-ID: cgroupsOf, control_test.go).
func sessionCgroups(ids []string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, cgroupsOf(id)...)
	}
	return out
}

// mountsOf lists the host's mounts (this process's table) that name one
// of words: a session id or the node's TMPDIR.
func mountsOf(words []string) []string {
	var out []string
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		for _, w := range words {
			if w != "" && strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// prober sends requests for sessions through a load balancer every
// 200 ms, each in its own goroutine with a bounded client, until stop.
type prober struct {
	mu      sync.Mutex
	answers []answer
	done    chan struct{}
	wg      sync.WaitGroup
}

func probeSessions(lb string, ss []lbSession) *prober {
	p := &prober{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			s := ss[i%len(ss)]
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				var a answer
				if i%2 == 0 {
					a = send(120*time.Second, "GET", lb+"/v1/sessions/"+s.id, nil)
				} else {
					a = send(120*time.Second, "POST", lb+"/v1/sessions/"+s.id+"/exec", map[string]any{"code": "print(x)"})
				}
				p.mu.Lock()
				p.answers = append(p.answers, a)
				p.mu.Unlock()
			}()
		}
	}()
	return p
}

func (p *prober) count(status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.answers {
		if a.status == status {
			n++
		}
	}
	return n
}

func (p *prober) byStatus() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int{}
	for _, a := range p.answers {
		k := fmt.Sprint(a.status)
		if a.err != nil {
			k = "no answer"
		}
		m[k]++
	}
	return m
}

// stop ends the probes and waits for those in flight (each bounded by
// its client's timeout).
func (p *prober) stop() []answer {
	close(p.done)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]answer(nil), p.answers...)
}
