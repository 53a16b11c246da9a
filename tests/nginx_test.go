//go:build integration

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// nginxLB is Debian's nginx (nginx-light) with deploy/nginx/sbx.conf,
// included in the http {} block of a minimal nginx.conf under a
// temporary prefix. nginx runs in the foreground as one process (daemon
// off, master_process off: nothing of it outlives its pid), as uid 65534
// when the test runs as root.
var nginxLB = balancer{
	name:    "nginx",
	prog:    "nginx",
	pkg:     "nginx-light",
	config:  "../deploy/nginx/sbx.conf",
	server:  func(_ int, addr string) string { return "server " + addr + " max_fails" },
	listen:  func(port int) string { return fmt.Sprintf("listen 127.0.0.1:%d;", port) },
	command: nginxCommand,
}

func nginxCommand(t *testing.T, r runner, ngx, text string) *exec.Cmd {
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
	return exec.Command(args[0], args[1:]...)
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
		c := startCluster(t, r, nginxLB)

		// 1. Spread.
		c.checkSpread()

		// 2. Sessions stay on their node; the header routes.
		onNode := c.sessionsByNode()
		checkHeaderRoutes(t, c.lb, onNode[nodeName(1)][0], nodeName(2))

		// 3. Drain sbx-1 under load, with a run in flight on it.
		c.checkDrain(onNode[nodeName(0)])

		// The others' sessions lived on.
		for _, s := range append(onNode[nodeName(1)], onNode[nodeName(2)]...) {
			if a := send(60*time.Second, "POST", c.lb+"/v1/sessions/"+s.id+"/exec", map[string]any{"code": "print(x)"}); a.status != 200 || a.node != s.node {
				t.Errorf("session %s of %s after sbx-1's drain: %v", s.id, s.node, a)
			}
		}
	})
}
