//go:build integration

package tests

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lookTool finds a program a deployment test needs (a real load
// balancer). Missing, the test skips, but not under SBX_MUST_WORK=1
// (.ci/run, which installs it): there it fails, so that CI never reports
// a skipped deployment test as a pass.
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (Debian: apt-get install %s; .ci/run installs it): this test runs the documented configuration on a real one", name, pkg)
		if os.Getenv("SBX_MUST_WORK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// startNginxCluster is startCluster with nginx in front, configured from
// deploy/nginx/sbx.conf with only its addresses replaced, included in
// the http {} block of a minimal nginx.conf under a temporary prefix.
// nginx runs in the foreground as one process (daemon off,
// master_process off: nothing of it outlives its pid), as uid 65534
// when the test runs as root.
func startNginxCluster(t *testing.T, r runner) *cluster {
	ngx := lookTool(t, "nginx", "nginx-light")
	c := &cluster{t: t, r: r, hlog: &lockedBuffer{}}
	cfg, err := os.ReadFile("../deploy/nginx/sbx.conf")
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
		if !strings.Contains(text, "server "+old+" max_fails") {
			t.Fatalf("deploy/nginx/sbx.conf has no server %s for %s", old, nodeName(i))
		}
		text = strings.ReplaceAll(text, old, ln.Addr().String())
		c.startNode(i)
	}
	port := freePort(t)
	if !strings.Contains(text, "listen 127.0.0.1:8377;") {
		t.Fatal("deploy/nginx/sbx.conf does not listen on 127.0.0.1:8377")
	}
	text = strings.ReplaceAll(text, "listen 127.0.0.1:8377;", fmt.Sprintf("listen 127.0.0.1:%d;", port))
	as := r
	if os.Geteuid() == 0 {
		as = runner{"uid65534", nobody}
	}
	prefix := ownedDir(t, as)
	main := fmt.Sprintf(`master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/sbx.conf;
}
`, prefix)
	for name, body := range map[string]string{"nginx.conf": main, "sbx.conf": text} {
		if err := os.WriteFile(filepath.Join(prefix, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{ngx, "-p", prefix + "/", "-e", "stderr", "-c", filepath.Join(prefix, "nginx.conf"), "-g", "daemon off;"}
	if as.uid != os.Geteuid() {
		args = append([]string{"setpriv", fmt.Sprintf("--reuid=%d", as.uid), fmt.Sprintf("--regid=%d", as.uid), "--clear-groups"}, args...)
	}
	if out, err := exec.Command(args[0], append(append([]string{}, args[1:]...), "-t")...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t on deploy/nginx/sbx.conf: %v\n%s", err, out)
	}
	c.haproxy = exec.Command(args[0], args[1:]...)
	c.haproxy.Stdout, c.haproxy.Stderr = c.hlog, c.hlog
	if err := c.haproxy.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.haproxy.Wait(); close(done) }()
	t.Cleanup(func() {
		c.haproxy.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.haproxy.Process.Kill()
			<-done
		}
	})
	c.lb = fmt.Sprintf("http://127.0.0.1:%d", port)
	c.waitFor(60*time.Second, "every node answering through nginx", func() bool {
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

// checkHeaderRoutes: X-Sbx-Session-Route routes a request whose path
// names no node to the node it names (which answers 404 for an id it does
// not have), and the id in a path wins over a header naming another node.
func checkHeaderRoutes(t *testing.T, lb string, s lbSession, via string) {
	t.Helper()
	a := send(60*time.Second, "GET", lb+"/v1/sessions/nosuch", nil, "X-Sbx-Session-Route", via)
	if code, msg, _, ok := a.apiErr(); a.status != 404 || !ok || code != "no_session" || a.node != via || !strings.Contains(msg, "on node "+via) {
		t.Errorf("GET /v1/sessions/nosuch with X-Sbx-Session-Route %s: %v, want 404 from %s", via, a, via)
	}
	a = send(60*time.Second, "GET", lb+"/v1/sessions/"+s.id, nil, "X-Sbx-Session-Route", via)
	if a.status != 200 || a.node != s.node {
		t.Errorf("GET %s's session %s with X-Sbx-Session-Route %s: %v, want 200 from %s (the id wins)", s.node, s.id, via, a, s.node)
	}
}

// TestDeployNginx: three `sbx serve` behind Debian's nginx (nginx-light)
// with deploy/nginx/sbx.conf, the smaller sibling of TestDeployMultiNode.
// One-shot runs spread over all three; sessions created through nginx
// stay on their node (every cell's answer from the node the id names,
// the state lasting), and X-Sbx-Session-Route routes too; SIGTERM drains
// sbx-1 under load with a run in flight on it and no request fails (its
// 503s are sent on: nginx has no active health check), its sessions are
// 404 after its restart, and it takes runs again.
func TestDeployNginx(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := startNginxCluster(t, r)
		nodes := []string{nodeName(0), nodeName(1), nodeName(2)}

		// 1. Spread.
		stop := make(chan struct{})
		l := c.load(6, stop)
		c.waitFor(120*time.Second, "30 one-shot runs through nginx", func() bool { return l.total.Load() >= 30 })
		close(stop)
		l.wg.Wait()
		spread, fails := l.snapshot()
		t.Logf("nginx spread: %d requests, per node %v, %d failed", l.total.Load(), spread, len(fails))
		if len(fails) > 0 {
			t.Errorf("one-shot runs through nginx failed: %v", fails)
		}
		for _, n := range nodes {
			if spread[n] == 0 {
				t.Errorf("node %s got none of the one-shot runs: %v", n, spread)
			}
		}

		// 2. Sessions stay on their node; the header routes.
		sess := checkSessionsStayOnTheirNodes(t, c.lb, nodes, 2)
		onNode := map[string][]lbSession{}
		for _, s := range sess {
			onNode[s.node] = append(onNode[s.node], s)
		}
		checkHeaderRoutes(t, c.lb, onNode[nodeName(1)][0], nodeName(2))

		// 3. Drain sbx-1 under load, with a run in flight on it.
		mark := marker(t)
		defer killMarked(mark)
		n1 := c.nodes[0]
		inflight := make(chan error, 1)
		go func() {
			_, err := (&cluster{lb: n1.base}).run(map[string]any{"argv": []string{"python3", "-c", "import time; time.sleep(4)", mark}})
			inflight <- err
		}()
		c.waitFor(30*time.Second, "the long run started on sbx-1", func() bool { return len(processesWith(mark)) > 0 })
		stop = make(chan struct{})
		l = c.load(4, stop)
		time.Sleep(time.Second)
		start := time.Now()
		n1.cmd.Process.Signal(syscall.SIGTERM)
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
		c.startNode(0)
		c.waitFor(60*time.Second, "sbx-1 taking runs through nginx after its restart", func() bool {
			m, _ := l.snapshot()
			return m["sbx-1"] > after["sbx-1"]
		})
		c.waitRouted(onNode[nodeName(0)][0])
		checkGone(t, c.lb, onNode[nodeName(0)])
		close(stop)
		l.wg.Wait()
		perNode, fails := l.snapshot()
		t.Logf("nginx drain: sbx-1 drained in %v with a 4s run in flight; %d requests through nginx meanwhile, per node %v, %d failed", drain.Round(time.Millisecond), l.total.Load(), perNode, len(fails))
		if len(fails) > 0 {
			t.Errorf("requests failed through nginx while sbx-1 drained: %d of %d: %v", len(fails), l.total.Load(), fails)
		}
		// The others' sessions lived on.
		for _, s := range append(onNode[nodeName(1)], onNode[nodeName(2)]...) {
			if a := send(60*time.Second, "POST", c.lb+"/v1/sessions/"+s.id+"/exec", map[string]any{"code": "print(x)"}); a.status != 200 || a.node != s.node {
				t.Errorf("session %s of %s after sbx-1's drain: %v", s.id, s.node, a)
			}
		}
	})
}
