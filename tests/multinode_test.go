//go:build integration

package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// cluster is three `sbx serve` nodes behind a real load balancer (bal)
// configured from its documented configuration under deploy/. The test
// holds each node's listening socket and passes it in LISTEN_FDS, as
// systemd's sbx.socket does: a node restarted after SIGKILL or a drain is
// on the same address, which the configuration names.
type cluster struct {
	t     *testing.T
	r     runner
	bal   balancer
	lb    string // http://127.0.0.1:PORT
	socks [3]*net.TCPListener
	nodes [3]*server
	lbCmd *exec.Cmd
	lbLog *lockedBuffer
}

// balancer is what the deployment tests vary: the load balancer in
// front of the nodes and how its documented configuration is run.
type balancer struct {
	name   string // in messages: "HAProxy", "nginx"
	prog   string // its program
	pkg    string // the Debian package that has it
	config string // its documented configuration, relative to tests/
	// server is the text of config that names node i at addr: the test
	// finds it with the documented addr (127.0.0.1:1837N), then puts the
	// node's socket in place of that addr.
	server func(i int, addr string) string
	// listen is config's directive for the front end on 127.0.0.1:port
	// (documented: 8377).
	listen func(port int) string
	// command writes text (config with the test's addresses) where the
	// balancer reads it, and returns the command that runs it in the
	// foreground as one process, which the test ends by its pid.
	command func(t *testing.T, r runner, prog, text string) *exec.Cmd
	// healthChecked: it polls /readyz and takes a draining node out of
	// the rotation (HAProxy). Without an active check (nginx) a draining
	// node's 503s are sent on to another node.
	healthChecked bool
}

// haproxyLB is Debian's HAProxy with deploy/haproxy/sbx.cfg.
var haproxyLB = balancer{
	name:   "HAProxy",
	prog:   "haproxy",
	pkg:    "haproxy",
	config: "../deploy/haproxy/sbx.cfg",
	server: func(i int, addr string) string { return "server " + nodeName(i) + " " + addr },
	listen: func(port int) string { return fmt.Sprintf("bind 127.0.0.1:%d", port) },
	command: func(t *testing.T, _ runner, prog, text string) *exec.Cmd {
		path := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		// -db: foreground, no daemon.
		return exec.Command(prog, "-db", "-f", path)
	},
	healthChecked: true,
}

func nodeName(i int) string { return fmt.Sprintf("sbx-%d", i+1) }

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCluster starts the three nodes and bal in front of them, on its
// documented configuration with only its addresses replaced, and waits
// until each node has answered through it.
func startCluster(t *testing.T, r runner, bal balancer) *cluster {
	prog := lookTool(t, bal.prog, bal.pkg)
	c := &cluster{t: t, r: r, bal: bal, lbLog: &lockedBuffer{}}
	cfg, err := os.ReadFile(bal.config)
	if err != nil {
		t.Fatal(err)
	}
	text := string(cfg)
	for i := range c.socks {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		c.socks[i] = ln
		old := fmt.Sprintf("127.0.0.1:1837%d", i+1)
		if !strings.Contains(text, bal.server(i, old)) {
			t.Fatalf("%s has no %q for %s", bal.config, bal.server(i, old), nodeName(i))
		}
		text = strings.ReplaceAll(text, old, ln.Addr().String())
		c.startNode(i)
	}
	port := freePort(t)
	if !strings.Contains(text, bal.listen(8377)) {
		t.Fatalf("%s has no %q", bal.config, bal.listen(8377))
	}
	text = strings.ReplaceAll(text, bal.listen(8377), bal.listen(port))
	c.lbCmd = bal.command(t, r, prog, text)
	c.lbCmd.Stdout, c.lbCmd.Stderr = c.lbLog, c.lbLog
	if err := c.lbCmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.lbCmd.Wait(); close(done) }()
	t.Cleanup(func() {
		c.lbCmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.lbCmd.Process.Kill()
			<-done
		}
	})
	c.lb = fmt.Sprintf("http://127.0.0.1:%d", port)
	c.waitFor(60*time.Second, "every node answering through "+bal.name, func() bool {
		seen := map[string]bool{}
		for range 30 {
			if resp, err := http.Get(c.lb + "/readyz"); err == nil {
				resp.Body.Close()
				seen[resp.Header.Get("X-Sbx-Node")] = resp.StatusCode == 200
			}
		}
		return seen["sbx-1"] && seen["sbx-2"] && seen["sbx-3"]
	})
	return c
}

// startNode starts node i on its held socket.
func (c *cluster) startNode(i int) {
	if c.nodes[i] == nil {
		c.nodes[i] = activated(c.t, c.r, c.socks[i], c.nodeArgs(i)...)
		return
	}
	f, err := c.socks[i].File()
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	c.nodes[i] = activatedIn(c.t, c.r, f, c.nodes[i].tmp, c.nodeArgs(i)...)
}

func (c *cluster) nodeArgs(i int) []string {
	return []string{"--node-name", nodeName(i), "--drain-timeout", "60s", "--max-concurrent", "2", "--queue", "8"}
}

func (c *cluster) waitFor(d time.Duration, what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("not within %v: %s\n%s:\n%s", d, what, c.bal.name, c.lbLog)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// oneShot is one POST /v1/exec through HAProxy: the node that ran it, or
// why it failed (a status other than 200, or a Result that is not ok).
func (c *cluster) oneShot(code string) (node string, err error) {
	return c.run(map[string]any{"code": code})
}

// run posts req to /v1/exec through HAProxy, as oneShot.
func (c *cluster) run(req map[string]any) (node string, err error) {
	body, _ := json.Marshal(req)
	resp, err := http.Post(c.lb+"/v1/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	node = resp.Header.Get("X-Sbx-Node")
	if err != nil {
		// A node SIGKILLed while it sent the body: the client sees the
		// cut (a short Content-Length or no last chunk), an HTTP
		// failure, not a Result that lies.
		return node, fmt.Errorf("%s from %q, body cut after %d bytes: %v", resp.Status, node, len(b), err)
	}
	if resp.StatusCode != 200 {
		return node, fmt.Errorf("%s from %q: %s", resp.Status, node, b)
	}
	var res nsjail.Result
	if err := json.Unmarshal(b, &res); err != nil || res.Status != nsjail.StatusOK {
		return node, fmt.Errorf("from %s: status %s (%v): %s", node, res.Status, err, b)
	}
	return node, nil
}

// load sends one-shot runs through HAProxy from workers goroutines until
// stop is closed, counting answers per node and failures.
type load struct {
	mu       sync.Mutex
	perNode  map[string]int
	failures []string
	total    atomic.Int64
	wg       sync.WaitGroup
}

func (c *cluster) load(workers int, stop <-chan struct{}) *load {
	l := &load{perNode: map[string]int{}}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				node, err := c.oneShot("print(sum(range(1000)))")
				l.total.Add(1)
				l.mu.Lock()
				if err != nil {
					l.failures = append(l.failures, err.Error())
				} else {
					l.perNode[node]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *load) snapshot() (map[string]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for k, v := range l.perNode {
		m[k] = v
	}
	return m, append([]string(nil), l.failures...)
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkSpread sends one-shot runs through the balancer from 6 workers
// until 30 are answered: none fails, and each node got some.
func (c *cluster) checkSpread() {
	t := c.t
	t.Helper()
	stop := make(chan struct{})
	l := c.load(6, stop)
	c.waitFor(120*time.Second, "30 one-shot runs through "+c.bal.name, func() bool { return l.total.Load() >= 30 })
	close(stop)
	l.wg.Wait()
	spread, fails := l.snapshot()
	t.Logf("%s spread: %d requests, per node %v, %d failed", c.bal.name, l.total.Load(), spread, len(fails))
	if len(fails) > 0 {
		t.Errorf("one-shot runs through %s failed: %v", c.bal.name, fails)
	}
	for i := range 3 {
		if spread[nodeName(i)] == 0 {
			t.Errorf("node %s got none of the one-shot runs: %v", nodeName(i), spread)
		}
	}
}

// sessionsByNode creates sessions through the balancer (2 a node), checks
// each stays on its node (checkSessionsStayOnTheirNodes), and returns
// them by node.
func (c *cluster) sessionsByNode() map[string][]lbSession {
	sess := checkSessionsStayOnTheirNodes(c.t, c.lb, []string{nodeName(0), nodeName(1), nodeName(2)}, 2)
	onNode := map[string][]lbSession{}
	for _, s := range sess {
		onNode[s.node] = append(onNode[s.node], s)
	}
	return onNode
}

// checkDrain drains sbx-1 by SIGTERM under load through the balancer,
// with a 4s run in flight on it: the run finishes, sbx-1 exits cleanly,
// and no request through the balancer fails. A health-checked balancer
// saw sbx-1's /readyz go 503 "draining" and sends it nothing once it
// exited; restarted, sbx-1 takes runs again, and its sessions (sess),
// which ended with the drain, are 404 from it.
func (c *cluster) checkDrain(sess []lbSession) {
	t := c.t
	t.Helper()
	mark := marker(t)
	t.Cleanup(func() { killMarked(mark) })
	n1 := c.nodes[0]
	if c.bal.healthChecked {
		if code, body := get(n1.base + "/readyz"); code != 200 {
			t.Fatalf("sbx-1 /readyz before the drain: %d %s", code, body)
		}
	}
	inflight := make(chan error, 1)
	go func() {
		_, err := (&cluster{lb: n1.base}).run(map[string]any{"argv": []string{"python3", "-c", "import time; time.sleep(4)", mark}})
		inflight <- err
	}()
	c.waitFor(30*time.Second, "the long run started on sbx-1", func() bool { return len(processesWith(mark)) > 0 })
	stop := make(chan struct{})
	l := c.load(4, stop)
	time.Sleep(time.Second)
	start := time.Now()
	n1.cmd.Process.Signal(syscall.SIGTERM)
	if c.bal.healthChecked {
		time.Sleep(300 * time.Millisecond)
		if code, body := get(n1.base + "/readyz"); code != 503 || !strings.Contains(body, "draining") {
			t.Errorf("sbx-1 /readyz while draining: %d %s, want 503 draining", code, body)
		}
	}
	select {
	case err := <-n1.exited:
		if err != nil {
			t.Errorf("sbx-1 after its drain: %v\n%s", err, n1.stderr)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("sbx-1 did not exit after SIGTERM:\n%s", n1.stderr)
	}
	drain := time.Since(start)
	n1.cmd.ProcessState = &os.ProcessState{} // exited: its cleanup has nothing to stop
	if err := <-inflight; err != nil {
		t.Errorf("the run in flight on sbx-1 during its drain: %v", err)
	}
	after, _ := l.snapshot()
	if c.bal.healthChecked {
		time.Sleep(2 * time.Second)
		during := after
		after, _ = l.snapshot()
		if after["sbx-1"] != during["sbx-1"] {
			t.Errorf("sbx-1 answered runs after its drain ended: %d then %d", during["sbx-1"], after["sbx-1"])
		}
	}
	c.startNode(0)
	c.waitFor(60*time.Second, "sbx-1 taking runs through "+c.bal.name+" after its restart", func() bool {
		m, _ := l.snapshot()
		return m["sbx-1"] > after["sbx-1"]
	})
	// Its sessions ended with the drain: 404 from sbx-1 now.
	c.waitRouted(sess[0])
	checkGone(t, c.lb, sess)
	close(stop)
	l.wg.Wait()
	perNode, fails := l.snapshot()
	t.Logf("%s drain: sbx-1 drained in %v with a 4s run in flight; %d requests through it meanwhile, per node %v, %d failed", c.bal.name, drain.Round(time.Millisecond), l.total.Load(), perNode, len(fails))
	if len(fails) > 0 {
		t.Errorf("requests failed through %s while sbx-1 drained: %d of %d: %v", c.bal.name, len(fails), l.total.Load(), fails)
	}
}

// TestDeployMultiNode: three `sbx serve` behind Debian's HAProxy with
// deploy/haproxy/sbx.cfg. One-shot runs spread over all three. SIGTERM
// drains a node under load: its /readyz goes 503, HAProxy takes it out,
// its run in flight finishes, and no request fails (the 503s of the
// drain are retried elsewhere); it comes back into the rotation when
// restarted. Sessions created through HAProxy stay on their node: every
// cell's answer comes from the node the id names, and the state lasts
// (x = 41, then x + 1 is 42); a node asked directly for another's session
// answers 421 naming it; a drained node's sessions are 404 after its
// restart. SIGKILL of a node: its run and its session's cell in flight
// fail cleanly (an HTTP error, never a wrong Result), the others go on;
// its sessions' requests get JSON errors naming it (421 from another node
// once HAProxy took it out, 404 from it once it is back), never a hang or
// a 200; nothing of it is left (its sandboxes' processes, their cgroups,
// mounts, TMPDIR), and after its restart it takes runs again.
func TestDeployMultiNode(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := startCluster(t, r, haproxyLB)

		// 1. Spread.
		c.checkSpread()

		// 1b. Sessions: created through HAProxy, each cell answered by
		// the session's own node, whose name starts the id; a node asked
		// directly for another's session answers 421 naming it.
		onNode := c.sessionsByNode()
		for i := range 3 {
			other := (i + 1) % 3
			checkMisdirected(t, c.nodes[other].base, nodeName(other), onNode[nodeName(i)][0])
		}
		checkHeaderRoutes(t, c.lb, onNode[nodeName(1)][0], nodeName(2))

		// 2. Drain sbx-1 under load, with a run in flight on it.
		c.checkDrain(onNode[nodeName(0)])

		// 3. SIGKILL sbx-2 with a run in flight.
		mark2 := marker(t)
		defer killMarked(mark2)
		n2 := c.nodes[1]
		killed := make(chan error, 1)
		go func() {
			_, err := (&cluster{lb: n2.base}).run(map[string]any{"argv": []string{"python3", "-c", "import time; time.sleep(60)", mark2}})
			killed <- err
		}()
		c.waitFor(30*time.Second, "the long run started on sbx-2", func() bool { return len(processesWith(mark2)) > 0 })
		// A cell in flight on one of sbx-2's sessions, and what sbx-2
		// holds: its sandboxes' processes, its sessions' cgroups.
		s2 := onNode[nodeName(1)]
		var s2ids []string
		for _, s := range s2 {
			s2ids = append(s2ids, s.id)
		}
		cellKilled := make(chan answer, 1)
		go func() {
			cellKilled <- send(120*time.Second, "POST", c.lb+"/v1/sessions/"+s2[0].id+"/exec", map[string]any{"code": "import time; time.sleep(60)"})
		}()
		c.waitFor(30*time.Second, "the long cell running on sbx-2", func() bool {
			a := send(30*time.Second, "GET", c.lb+"/v1/sessions/"+s2[0].id, nil)
			return a.status == 200 && bytes.Contains(a.body, []byte(`"running":true`))
		})
		heldProcs := procsBelow(n2.cmd.Process.Pid)
		heldCgroups := sessionCgroups(s2ids)
		t.Logf("sbx-2 at its SIGKILL: %d sessions, %d processes below it, session cgroups %v", len(s2), len(heldProcs), heldCgroups)
		stop := make(chan struct{})
		l := c.load(4, stop)
		time.Sleep(time.Second)
		killedAt := time.Now()
		n2.cmd.Process.Kill()
		<-n2.exited
		n2.cmd.ProcessState = &os.ProcessState{}
		if err := <-killed; err == nil {
			t.Errorf("the run in flight on the SIGKILLed sbx-2 got a 200 Result")
		} else {
			t.Logf("the run in flight on the SIGKILLed sbx-2: %v", err)
		}
		c.waitFor(30*time.Second, "sbx-2's payload gone after its SIGKILL", func() bool { return len(processesWith(mark2)) == 0 })
		// What the dead server left in its TMPDIR (its runs' files: it
		// ran no deferred cleanup); the restarted one must remove it.
		leftAtKill, _ := os.ReadDir(n2.tmp)
		t.Logf("sbx-2 left in its TMPDIR at its SIGKILL: %v", leftAtKill)
		if a := <-cellKilled; a.err == nil && a.status == 200 {
			t.Errorf("the cell in flight on the SIGKILLed sbx-2's session got a 200: %v", a)
		} else {
			t.Logf("the cell in flight on the SIGKILLed sbx-2's session: %v", a)
		}
		// Requests for sbx-2's sessions while it is dead and after its
		// restart, each in its own goroutine (one that waits in the held
		// socket's backlog must not hold up the others).
		pr := probeSessions(c.lb, s2)
		c.waitFor(60*time.Second, "HAProxy sends sbx-2's sessions elsewhere: a 421 naming it", func() bool { return pr.count(421) > 0 })
		down := time.Since(killedAt)
		c.startNode(1)
		c.waitFor(60*time.Second, "sbx-2 back in the rotation after its restart", func() bool {
			m, _ := l.snapshot()
			return m["sbx-2"] > 0
		})
		c.waitFor(60*time.Second, "sbx-2's restarted node answers its old sessions 404", func() bool { return pr.count(404) > 0 })
		close(stop)
		l.wg.Wait()
		answers := pr.stop()
		t.Logf("sbx-2's sessions around its SIGKILL: %d requests through HAProxy, by status %v; 421 from another node within %v of the kill", len(answers), pr.byStatus(), down.Round(time.Millisecond))
		for _, a := range answers {
			code, msg, node, ok := a.apiErr()
			switch {
			case a.err != nil || !ok:
				t.Errorf("a request for a SIGKILLed node's session: %v, want a JSON error", a)
			case a.status == 421 && (node != "sbx-2" || a.node == "sbx-2" || !strings.Contains(msg, "sbx-2")):
				t.Errorf("a 421 for sbx-2's session that does not name it, or from sbx-2 itself: %v", a)
			case a.status == 404 && (a.node != "sbx-2" || code != "no_session"):
				t.Errorf("a 404 for sbx-2's session from another node than the restarted sbx-2: %v", a)
			case a.status != 421 && a.status != 404 && a.status != 503:
				t.Errorf("a request for a SIGKILLed node's session: %v, want 421, 404 or 503", a)
			}
		}
		c.waitRouted(s2[0])
		checkGone(t, c.lb, s2)
		c.waitFor(30*time.Second, "nothing left of the SIGKILLed sbx-2's sandboxes", func() bool {
			for _, p := range heldProcs {
				if p.alive() {
					return false
				}
			}
			return len(sessionCgroups(s2ids)) == 0
		})
		if m := mountsOf(append(s2ids, n2.tmp)); len(m) > 0 {
			t.Errorf("host mounts of the SIGKILLed sbx-2's sessions: %v", m)
		}
		perNode, fails := l.snapshot()
		t.Logf("SIGKILL: %d requests through HAProxy around it, per node %v, %d failed: %v", l.total.Load(), perNode, len(fails), fails)
		// The runs sbx-2 held when it died (2 running, 8 queued at most)
		// fail as HTTP errors; none gets a 200 with a Result that lies.
		if len(fails) > 10 {
			t.Errorf("%d requests failed around sbx-2's SIGKILL, more than it held (10)", len(fails))
		}
		for _, f := range fails {
			if strings.HasPrefix(f, "from ") {
				t.Errorf("a 200 whose Result is not ok around the SIGKILL: %s", f)
			}
		}
		for _, e := range leftAtKill {
			if _, err := os.Stat(filepath.Join(n2.tmp, e.Name())); err == nil {
				t.Errorf("the restarted sbx-2 kept what the killed one left in its TMPDIR %s: %s\n%s", n2.tmp, e.Name(), c.nodes[1].stderr)
			}
		}
	})
}
