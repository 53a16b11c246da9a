package netproxy

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPythonClients runs testdata/net_client.py on the host against the
// proxy: urllib.request and http.client, configured only by the proxy
// environment variables, as the payload will be inside the sandbox.
func TestPythonClients(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: testdata/net_client.py is not exercised")
	}
	be := newBackend(t, echoHandler)
	srv, _ := tlsBackend(t)
	cafile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(cafile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxy(t, Config{
		Allow:   []string{"api.test", "example.com:443"},
		Resolve: map[string]string{"api.test:80": be.addr(), "example.com:443": srv.Listener.Addr().String()},
	})
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(k), "_proxy") {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env = append(env, k+"=http://"+addr)
	}
	env = append(env, "NO_PROXY=", "no_proxy=")

	for _, tc := range []struct {
		url    string
		status int    // 0: want an error from both clients
		body   string // in the body, or in the error
	}{
		{"http://api.test/py?x=1", 200, "GET /py?x=1 host=api.test"},
		{"https://example.com/py", 200, "tls /py host=example.com"},
		{"http://evil.test/", 403, "evil.test:80 is not on the allowlist"},
		{"https://evil.test/", 0, "403"},
		{fmt.Sprintf("http://127.0.0.1:%d/", portOf(t, be.addr())), 403, "loopback"},
		{"http://169.254.169.254/latest/meta-data/", 403, "link-local"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			cmd := exec.Command(py, "-I", "-B", "../testdata/net_client.py", tc.url, cafile)
			cmd.Env = env
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("net_client.py: %v\n%s", err, out)
			}
			var got map[string]struct {
				Status int    `json:"status"`
				Body   string `json:"body"`
				Error  string `json:"error"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("net_client.py printed %q: %v", out, err)
			}
			for _, client := range []string{"urllib", "http.client"} {
				r, ok := got[client]
				switch {
				case !ok:
					t.Errorf("%s: no result in %s", client, out)
				case tc.status == 0 && (r.Error == "" || !strings.Contains(r.Error, tc.body)):
					t.Errorf("%s: %+v, want an error with %q", client, r, tc.body)
				case tc.status != 0 && (r.Status != tc.status || !strings.Contains(r.Body, tc.body)):
					t.Errorf("%s: %+v, want %d with %q", client, r, tc.status, tc.body)
				}
			}
		})
	}
	denied := 0
	for _, a := range waitAttempts(t, p, 12) {
		if !a.Allowed {
			denied++
		}
	}
	if denied != 8 {
		t.Errorf("%d attempts denied, want 8 (4 URLs, 2 clients): %+v", denied, p.Attempts())
	}
}

// TestPythonDirect only checks that testdata/net_direct.py runs and reports
// in the agreed shape; what it must see inside the sandbox is for the
// end-to-end tests.
func TestPythonDirect(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: testdata/net_direct.py is not exercised")
	}
	out, err := exec.Command(py, "-I", "-B", "../testdata/net_direct.py", fmt.Sprintf("127.0.0.1:%d", closedPort(t)), "localhost").Output()
	if err != nil {
		t.Fatalf("net_direct.py: %v\n%s", err, out)
	}
	var got map[string]struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		Errno int    `json:"errno"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("net_direct.py printed %q: %v", out, err)
	}
	if tcp := got["tcp"]; tcp.OK || !strings.Contains(tcp.Error, "ConnectionRefusedError") || tcp.Errno != 111 {
		t.Errorf("tcp to a closed port: %+v", tcp)
	}
	for _, k := range []string{"udp", "dns"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %s result in %s", k, out)
		}
	}
}
