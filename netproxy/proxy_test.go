package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backend is an HTTP test server on 127.0.0.1 that counts its requests.
type backend struct {
	*httptest.Server
	hits atomic.Int64
}

func newBackend(t *testing.T, h http.HandlerFunc) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) addr() string { return b.Listener.Addr().String() }

// echoHandler answers with what the destination received.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s host=%s body=%s proxy-auth=%q", r.Method, r.URL.RequestURI(), r.Host, body, r.Header.Get("Proxy-Authorization"))
}

func proxyClient(t *testing.T, proxy string, tlsConf *tls.Config) *http.Client {
	t.Helper()
	u, _ := url.Parse("http://user:secret@" + proxy)
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

func TestForwardThroughPin(t *testing.T) {
	be := newBackend(t, echoHandler)
	p, addr := startProxy(t, Config{
		Allow:   []string{"api.test"},
		Resolve: map[string]string{"api.test:80": be.addr()},
	})
	c := proxyClient(t, addr, nil)

	status, body := get(t, c, "http://api.test/hello?x=1")
	if want := `GET /hello?x=1 host=api.test body= proxy-auth=""`; status != 200 || body != want {
		t.Errorf("GET = %d %q, want 200 %q", status, body, want)
	}
	// A body of known length, and one of unknown length (sent chunked).
	resp, err := c.Post("http://api.test/p", "text/plain", strings.NewReader("known"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `POST /p host=api.test body=known proxy-auth=""`; string(b) != want {
		t.Errorf("POST = %q, want %q", b, want)
	}
	pr, pw := io.Pipe()
	go func() { io.WriteString(pw, "chunk"); io.WriteString(pw, "ed"); pw.Close() }()
	resp, err = c.Post("http://api.test/c", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `POST /c host=api.test body=chunked proxy-auth=""`; string(b) != want {
		t.Errorf("chunked POST = %q, want %q", b, want)
	}

	as := waitAttempts(t, p, 3)
	a := as[0]
	if !a.Allowed || a.Host != "api.test" || a.Port != 80 || a.Method != "GET" || a.Addr != be.addr() || a.Reason != "" || a.Error != "" {
		t.Errorf("attempt = %+v", a)
	}
	if a.BytesUp == 0 || a.BytesDown == 0 {
		t.Errorf("attempt counted no bytes: %+v", a)
	}
	if as[1].Method != "POST" || as[2].Method != "POST" {
		t.Errorf("attempts out of order: %+v", as)
	}
}

// rawBackend answers every connection with response after reading the
// request header, and hands the header it read to the test.
func rawBackend(t *testing.T, response string) (string, <-chan string) {
	got := make(chan string, 10)
	addr := tcpServer(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		var hdr strings.Builder
		for {
			line, err := br.ReadString('\n')
			hdr.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		got <- hdr.String()
		io.WriteString(c, response)
	})
	return addr, got
}

func TestForwardRewritesHeaders(t *testing.T) {
	be, got := rawBackend(t, "HTTP/1.0 200 OK\r\n"+
		"Connection: close, X-Drop\r\n"+
		"X-Drop: 1\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Authenticate: Basic realm=x\r\n"+
		"X-Resp: 1\r\n"+
		"\r\n"+
		"close-delimited body")
	_, addr := startProxy(t, Config{
		Allow:   []string{"api.test"},
		Resolve: map[string]string{"api.test": be},
	})
	port := portOf(t, be)
	resp, body := exchange(t, addr, fmt.Sprintf("GET http://API.test.:%d/hello?x=1 HTTP/1.1\r\n", port)+
		"Host: other.test\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"Connection: keep-alive, X-Secret\r\n"+
		"X-Secret: 1\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Upgrade: websocket\r\n"+
		"TE: trailers\r\n"+
		"X-Keep: yes\r\n"+
		"\r\n")

	var req string
	select {
	case req = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the destination got no request")
	}
	if want := "GET /hello?x=1 HTTP/1.1\r\n"; !strings.HasPrefix(req, want) {
		t.Errorf("request line: got %q, want %q", firstLine(req), want)
	}
	for _, want := range []string{fmt.Sprintf("Host: api.test:%d\r\n", port), "X-Keep: yes\r\n", "Connection: close\r\n", "Via: 1.1 sbx\r\n"} {
		if !strings.Contains(req, want) {
			t.Errorf("destination did not get %q in:\n%s", want, req)
		}
	}
	for _, bad := range []string{"Proxy-Authorization", "c2VjcmV0", "Proxy-Connection", "X-Secret", "Keep-Alive", "Upgrade", "Te:", "other.test", "User-Agent", "keep-alive"} {
		if strings.Contains(req, bad) {
			t.Errorf("destination got %q in:\n%s", bad, req)
		}
	}

	if resp.StatusCode != 200 || body != "close-delimited body" {
		t.Errorf("response = %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Resp") != "1" || resp.Header.Get("Via") != "1.1 sbx" {
		t.Errorf("response header lost end-to-end fields: %v", resp.Header)
	}
	for _, bad := range []string{"X-Drop", "Keep-Alive", "Proxy-Authenticate"} {
		if resp.Header.Get(bad) != "" {
			t.Errorf("client got hop-by-hop %s: %v", bad, resp.Header)
		}
	}
	// A close-delimited body goes to a 1.1 client chunked, so that a cut
	// would show as truncation.
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || !resp.Close || resp.Proto != "HTTP/1.1" {
		t.Errorf("response framing: proto %s, TE %v, close %v", resp.Proto, resp.TransferEncoding, resp.Close)
	}
}

// Keep-alive is off: a second pipelined request on the same connection is
// never read, let alone forwarded.
func TestOneRequestPerConnection(t *testing.T) {
	be := newBackend(t, echoHandler)
	p, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET http://api.test/one HTTP/1.1\r\nHost: api.test\r\n\r\nGET http://api.test/two HTTP/1.1\r\nHost: api.test\r\n\r\n"
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !resp.Close || !strings.HasPrefix(string(b), "GET /one ") {
		t.Errorf("first response: close %v, body %q", resp.Close, b)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("after the first response: read %d, %v; want the connection closed", n, err)
	}
	waitAttempts(t, p, 1)
	if h := be.hits.Load(); h != 1 {
		t.Errorf("destination got %d requests, want 1", h)
	}
}

func TestExpectContinue(t *testing.T) {
	var sawExpect atomic.Value
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		sawExpect.Store(r.Header.Get("Expect"))
		echoHandler(w, r)
	})
	_, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "POST http://api.test/e HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 100 {
		t.Fatalf("want 100 Continue before the body, got %v %v", resp, err)
	}
	io.WriteString(c, "hello")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "body=hello") {
		t.Errorf("response %d %q", resp.StatusCode, b)
	}
	if e := sawExpect.Load(); e != "" {
		t.Errorf("destination got Expect: %q", e)
	}

	resp, body := exchange(t, addr, "POST http://api.test/e HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nExpect: magic\r\n\r\nhello")
	if resp.StatusCode != 417 || !strings.Contains(body, `expectation "magic"`) {
		t.Errorf("unknown expectation: %d %q", resp.StatusCode, body)
	}
}

func tlsBackend(t *testing.T) (*httptest.Server, *tls.Config) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s host=%s", r.URL.Path, r.Host)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	// httptest's certificate is for example.com (and 127.0.0.1).
	return srv, &tls.Config{RootCAs: pool}
}

func TestConnectTLS(t *testing.T) {
	srv, tlsConf := tlsBackend(t)
	srvAddr := srv.Listener.Addr().String()
	p, addr := startProxy(t, Config{
		Allow:   []string{"example.com:443"},
		Resolve: map[string]string{"example.com:443": srvAddr},
	})
	c := proxyClient(t, addr, tlsConf)
	status, body := get(t, c, "https://example.com/secure")
	if status != 200 || body != "tls /secure host=example.com" {
		t.Errorf("GET over CONNECT = %d %q", status, body)
	}
	a := findAttempt(t, waitAttempts(t, p, 1), "CONNECT", "example.com")
	if !a.Allowed || a.Port != 443 || a.Addr != srvAddr || a.BytesUp < 100 || a.BytesDown < 100 || a.Error != "" {
		t.Errorf("attempt = %+v", a)
	}
	// The port is part of the rule: example.com:8443 is not allowed.
	resp, rbody := exchange(t, addr, "CONNECT example.com:8443 HTTP/1.1\r\nHost: example.com:8443\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(rbody, "example.com:8443 is not on the allowlist") {
		t.Errorf("CONNECT to another port: %d %q", resp.StatusCode, rbody)
	}
}

// fakeDNS resolves from a table and counts lookups.
type fakeDNS struct {
	mu    sync.Mutex
	table map[string][]string
	calls map[string]int
}

func (f *fakeDNS) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[host]++
	var out []netip.Addr
	for _, s := range f.table[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if out == nil {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	return out, nil
}

// recordingDial records every address dialled and connects it to to, or
// to the address itself when to is "".
type recordingDial struct {
	mu     sync.Mutex
	to     string
	dialed []string
	fail   map[string]bool
}

func (d *recordingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	to, fail := d.to, d.fail[addr]
	d.mu.Unlock()
	if network != "tcp" {
		return nil, fmt.Errorf("dial %s %s: unexpected network", network, addr)
	}
	if fail {
		return nil, fmt.Errorf("dial tcp %s: connect: no route to host", addr)
	}
	if to == "" {
		to = addr
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", to)
}

func (d *recordingDial) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

func TestRefusals(t *testing.T) {
	be := newBackend(t, echoHandler)
	port := portOf(t, be.addr())
	dns := &fakeDNS{table: map[string][]string{
		"rebind.test": {"127.0.0.1"},
		"mixed.test":  {"93.184.216.34", "127.0.0.1"},
		"meta.test":   {"169.254.169.254"},
		"mapped.test": {"::ffff:127.0.0.1"},
		"lan.test":    {"192.168.1.10"},
		"nat64.test":  {"64:ff9b::a9fe:a9fe"},
	}}
	dial := &recordingDial{}
	p, addr := startProxy(t, Config{
		Allow: []string{"api.test", "*.wild.test", "pay.test:443",
			"rebind.test", "mixed.test", "meta.test", "mapped.test", "lan.test", "nat64.test", "nodns.test"},
		Resolve: map[string]string{
			"api.test":    be.addr(),
			"a.wild.test": be.addr(),
		},
		Resolver: dns.resolve,
		Dial:     dial.dial,
	})
	for _, tc := range []struct {
		req    string // request line; a Host header and the blank line are added
		status int
		reason string // in the body and in Attempt.Reason (or Error for 502)
		host   string // Attempt.Host
	}{
		{"GET http://evil.test/ HTTP/1.1", 403, "evil.test:80 is not on the allowlist", "evil.test"},
		{"CONNECT evil.test:443 HTTP/1.1", 403, "evil.test:443 is not on the allowlist", "evil.test"},
		{"GET http://pay.test/ HTTP/1.1", 403, "pay.test:80 is not on the allowlist", "pay.test"},
		{"GET http://api.test.evil.test/ HTTP/1.1", 403, "not on the allowlist", "api.test.evil.test"},
		{"GET http://wild.test/ HTTP/1.1", 403, "wild.test:80 is not on the allowlist", "wild.test"},
		{fmt.Sprintf("GET http://127.0.0.1:%d/ HTTP/1.1", port), 403, "is loopback (127.0.0.0/8, RFC 1122) and not on the allowlist", "127.0.0.1"},
		{fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1", port), 403, "loopback", "127.0.0.1"},
		{"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1", 403, "169.254.169.254:80 is link-local", "169.254.169.254"},
		{"CONNECT 169.254.169.254:80 HTTP/1.1", 403, "link-local", "169.254.169.254"},
		{"GET http://[::ffff:169.254.169.254]/ HTTP/1.1", 403, "link-local", "169.254.169.254"},
		{"GET http://[::1]/ HTTP/1.1", 403, "loopback (::1", "::1"},
		{"GET http://[fe80::1]/ HTTP/1.1", 403, "link-local (fe80::/10", "fe80::1"},
		{"GET http://10.0.0.1/ HTTP/1.1", 403, "private (10.0.0.0/8", "10.0.0.1"},
		{"GET http://100.64.0.1/ HTTP/1.1", 403, "carrier-grade NAT", "100.64.0.1"},
		{"GET http://0.0.0.0/ HTTP/1.1", 403, "unspecified", "0.0.0.0"},
		{"GET http://224.0.0.1/ HTTP/1.1", 403, "multicast", "224.0.0.1"},
		{"GET http://255.255.255.255/ HTTP/1.1", 403, "broadcast", "255.255.255.255"},
		{"GET http://93.184.216.34/ HTTP/1.1", 403, "93.184.216.34:80 is not on the allowlist", "93.184.216.34"},
		{"GET http://rebind.test/ HTTP/1.1", 403, "rebind.test resolves to 127.0.0.1, loopback", "rebind.test"},
		{"GET http://mixed.test/ HTTP/1.1", 403, "mixed.test resolves to 127.0.0.1", "mixed.test"},
		{"GET http://meta.test/ HTTP/1.1", 403, "meta.test resolves to 169.254.169.254, link-local", "meta.test"},
		{"GET http://mapped.test/ HTTP/1.1", 403, "mapped.test resolves to 127.0.0.1", "mapped.test"},
		{"GET http://lan.test/ HTTP/1.1", 403, "resolves to 192.168.1.10, private", "lan.test"},
		{"GET http://nat64.test/ HTTP/1.1", 403, "NAT64 form of 169.254.169.254", "nat64.test"},
		{"GET http://a.wild.test/ HTTP/1.1", 403, "a.wild.test:80 is pinned to 127.0.0.1, loopback (127.0.0.0/8, RFC 1122); only an exact allowlist entry (not *.wild.test) may reach it", "a.wild.test"},
		{"GET http://nodns.test/ HTTP/1.1", 502, "resolve nodns.test: lookup nodns.test: no such host", "nodns.test"},

		{"GET http://127.1/ HTTP/1.1", 400, "dotted-quad", ""},
		{"GET http://0x7f000001/ HTTP/1.1", 400, "dotted-quad", ""},
		{"GET http://2130706433/ HTTP/1.1", 400, "dotted-quad", ""},
		{"CONNECT 0177.0.0.1:80 HTTP/1.1", 400, "dotted-quad", ""},
		{"GET http://[fe80::1%25lo]/ HTTP/1.1", 400, "zone", ""},
		{"GET / HTTP/1.1", 400, "not absolute-form", ""},
		{"GET https://api.test/ HTTP/1.1", 400, "must use CONNECT", ""},
		{"GET ftp://api.test/ HTTP/1.1", 400, `scheme "ftp" is not supported`, ""},
		{"GET http://user:pw@api.test/ HTTP/1.1", 400, "userinfo", ""},
		{"GET http://api.test/#frag HTTP/1.1", 400, "has a fragment", ""},
		{"GET http://api.test:0/ HTTP/1.1", 400, "1 to 65535", ""},
		{"GET http://api.test:99999/ HTTP/1.1", 400, "1 to 65535", ""},
		{"CONNECT api.test HTTP/1.1", 400, "has no port", ""},
		{"CONNECT /etc/passwd HTTP/1.1", 400, "is not HOST:PORT", ""},
		{"CONNECT user@api.test:443 HTTP/1.1", 400, "is not HOST:PORT", ""},
	} {
		t.Run(tc.req, func(t *testing.T) {
			n := len(p.Attempts())
			resp, body := exchange(t, addr, tc.req+"\r\nHost: api.test\r\n\r\n")
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.reason)
			}
			if strings.Count(body, "\n") != 1 {
				t.Errorf("reason is not one line: %q", body)
			}
			a := waitAttempts(t, p, n+1)[n]
			why := a.Reason
			if tc.status == 502 {
				why = a.Error
			}
			if a.Allowed != (tc.status == 502) || !strings.Contains(why, tc.reason) || a.Host != tc.host || a.Addr != "" || a.BytesUp != 0 || a.BytesDown != 0 {
				t.Errorf("attempt = %+v", a)
			}
		})
	}
	if d := dial.list(); len(d) != 0 {
		t.Errorf("refused requests dialled %v", d)
	}
	if h := be.hits.Load(); h != 0 {
		t.Errorf("the destination got %d requests", h)
	}
}

// A special address is reachable when the allowlist names it: the literal
// itself, or the exact name together with a pin.
func TestExplicitAllow(t *testing.T) {
	be := newBackend(t, echoHandler)
	port := portOf(t, be.addr())
	dns := &fakeDNS{table: map[string][]string{"split.test": {"127.0.0.1"}}}
	dial := &recordingDial{}
	_, addr := startProxy(t, Config{
		Allow: []string{
			fmt.Sprintf("127.0.0.1:%d", port), // a literal with its port
			"169.254.169.254:80",
			"split.test", // resolves to 127.0.0.1, allowed by the literal above
			"pinned.test",
		},
		Resolve:  map[string]string{"pinned.test": "127.0.0.1", "metadata.test": "169.254.169.254"},
		Resolver: dns.resolve,
		Dial:     dial.dial,
	})
	c := proxyClient(t, addr, nil)
	for _, u := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/lit", port),
		fmt.Sprintf("http://split.test:%d/split", port),
		fmt.Sprintf("http://pinned.test:%d/pin", port),
	} {
		if status, body := get(t, c, u); status != 200 || !strings.Contains(body, "GET /") {
			t.Errorf("GET %s = %d %q", u, status, body)
		}
	}
	// Another port of the listed literal stays closed.
	if status, body := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/", closedPort(t))); status != 403 || !strings.Contains(body, "loopback") {
		t.Errorf("other port of a listed literal: %d %q", status, body)
	}
	// The metadata address is dialled exactly as listed; the test's Dial
	// sends it to the backend instead.
	dial.mu.Lock()
	dial.to = be.addr()
	dial.mu.Unlock()
	if status, _ := get(t, c, "http://169.254.169.254/latest/meta-data/"); status != 200 {
		t.Errorf("listed 169.254.169.254: %d", status)
	}
	want := []string{
		fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", port),
		"169.254.169.254:80",
	}
	if got := dial.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dialled %v, want %v", got, want)
	}
}

// The name is resolved once, and the proxy dials the very addresses it
// checked, never the name: a rebinding resolver cannot swap in 127.0.0.1
// between the check and the connect.
func TestNoSecondResolution(t *testing.T) {
	be := newBackend(t, echoHandler)
	var calls atomic.Int64
	resolver := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("198.41.0.4")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	dial := &recordingDial{to: be.addr(), fail: map[string]bool{"93.184.216.34:80": true}}
	p, addr := startProxy(t, Config{Allow: []string{"flip.test"}, Resolver: resolver, Dial: dial.dial})
	if status, _ := get(t, proxyClient(t, addr, nil), "http://flip.test/"); status != 200 {
		t.Fatalf("status %d", status)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("resolved %d times, want 1", n)
	}
	if got, want := fmt.Sprint(dial.list()), "[93.184.216.34:80 198.41.0.4:80]"; got != want {
		t.Errorf("dialled %s, want %s (the checked addresses, in order)", got, want)
	}
	if a := waitAttempts(t, p, 1)[0]; a.Addr != "198.41.0.4:80" {
		t.Errorf("attempt address %q, want the one that answered", a.Addr)
	}
}

func TestDialFailure(t *testing.T) {
	port := closedPort(t)
	p, addr := startProxy(t, Config{Allow: []string{"down.test"}, Resolve: map[string]string{"down.test": fmt.Sprintf("127.0.0.1:%d", port)}})
	resp, body := exchange(t, addr, "GET http://down.test/ HTTP/1.1\r\nHost: down.test\r\n\r\n")
	if resp.StatusCode != 502 || !strings.Contains(body, "dial down.test:80: ") || !strings.Contains(body, "refused") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	a := waitAttempts(t, p, 1)[0]
	if !a.Allowed || a.Reason != "" || !strings.Contains(a.Error, "refused") {
		t.Errorf("attempt = %+v", a)
	}
}

func TestDownloadCap(t *testing.T) {
	const size = 100_000
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(bytes.Repeat([]byte("x"), size))
	})
	const limit = 150_000
	p, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}, MaxBytesDown: limit})
	c := proxyClient(t, addr, nil)

	// The first download fits; the second crosses the cap and is cut.
	if status, body := get(t, c, "http://api.test/1"); status != 200 || len(body) != size {
		t.Fatalf("first download: %d, %d bytes", status, len(body))
	}
	resp, err := c.Get("http://api.test/2")
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Fatalf("second download completed (%d bytes) across the cap", n)
		}
	}
	// The cap is used up: the next request is refused before any dial.
	status, body := get(t, c, "http://api.test/3")
	if status != 429 || !strings.Contains(body, "download cap of 150000 bytes is used up") {
		t.Errorf("after the cap: %d %q", status, body)
	}
	as := waitAttempts(t, p, 3)
	var total int64
	for _, a := range as {
		total += a.BytesDown
	}
	if total != limit {
		t.Errorf("%d bytes down in all, want exactly the cap %d", total, limit)
	}
	if !strings.Contains(as[1].Error, "download cap of 150000 bytes reached") {
		t.Errorf("cut attempt = %+v", as[1])
	}
	if as[2].Allowed || !strings.Contains(as[2].Reason, "used up") || as[2].Addr != "" {
		t.Errorf("refused attempt = %+v", as[2])
	}
	if h := be.hits.Load(); h != 2 {
		t.Errorf("destination hit %d times, want 2", h)
	}
}

func TestUploadCap(t *testing.T) {
	be := newBackend(t, echoHandler)
	const limit = 10_000
	p, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}, MaxBytesUp: limit})
	c := proxyClient(t, addr, nil)
	resp, err := c.Post("http://api.test/up", "application/octet-stream", bytes.NewReader(make([]byte, 100_000)))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "body=") {
			t.Fatalf("the upload went through: %d %.60q", resp.StatusCode, b)
		}
	}
	a := waitAttempts(t, p, 1)[0]
	if a.BytesUp != limit || !strings.Contains(a.Error, "upload cap of 10000 bytes reached") {
		t.Errorf("attempt = %+v", a)
	}
}

// The caps hold in tunnels too, across connections.
func TestTunnelDownloadCap(t *testing.T) {
	firehose := tcpServer(t, func(c net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	const limit = 1 << 20
	p, addr := startProxy(t, Config{Allow: []string{"hose.test"}, Resolve: map[string]string{"hose.test": firehose}, MaxBytesDown: limit})
	var got int64
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "CONNECT hose.test:9 HTTP/1.1\r\nHost: hose.test:9\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d", resp.StatusCode)
		}
		if resp.StatusCode == 200 {
			n, err := io.Copy(io.Discard, br)
			if isTimeout(err) {
				t.Fatal("the tunnel was not cut at the cap")
			}
			got += n
		} else if resp.StatusCode != 429 {
			t.Errorf("second CONNECT: %d, want 429", resp.StatusCode)
		}
		c.Close()
	}
	if got != limit {
		t.Errorf("client got %d bytes, want exactly the cap %d", got, limit)
	}
	as := waitAttempts(t, p, 2)
	if as[0].BytesDown != limit || !strings.Contains(as[0].Error, "download cap") {
		t.Errorf("attempt = %+v", as[0])
	}
}

func TestConnectionCap(t *testing.T) {
	be := newBackend(t, echoHandler)
	p, addr := startProxy(t, Config{
		Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()},
		MaxConns: 2, HeaderTimeout: 10 * time.Second,
	})
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitActive(t, p, 2)

	// Beyond the cap: 429 or a closed connection, at once, never a hang.
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n")
		b, err := io.ReadAll(c)
		c.Close()
		if isTimeout(err) {
			t.Fatalf("connection %d over the cap hangs", i)
		}
		if len(b) > 0 && !bytes.HasPrefix(b, []byte("HTTP/1.1 429 ")) {
			t.Fatalf("over the cap: %q", b)
		}
	}
	as := waitAttempts(t, p, 20)
	for _, a := range as {
		if a.Allowed || !strings.Contains(a.Reason, "connection cap reached: 2 connections already open") {
			t.Fatalf("attempt = %+v", a)
		}
	}
	if h := be.hits.Load(); h != 0 {
		t.Errorf("requests over the cap reached the destination %d times", h)
	}

	// Freeing a slot lets the next connection through.
	held[0].Close()
	waitActive(t, p, 1)
	if status, _ := get(t, proxyClient(t, addr, nil), "http://api.test/after"); status != 200 {
		t.Errorf("after a slot freed: %d", status)
	}
}

func TestSlowloris(t *testing.T) {
	be := newBackend(t, echoHandler)
	const ht = 300 * time.Millisecond
	p, addr := startProxy(t, Config{
		Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()},
		HeaderTimeout: ht, IdleTimeout: 10 * time.Second,
	})
	// Silent: 408 after the header timeout.
	t.Run("silent", func(t *testing.T) {
		// start before the dial: the proxy's clock starts at its accept,
		// which a loaded machine can run well before Dial returns here.
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if el := time.Since(start); isTimeout(err) || el < ht-50*time.Millisecond || el > 3*time.Second {
			t.Fatalf("closed after %v (%v), want about %v", el, err, ht)
		}
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 408 ")) {
			t.Errorf("got %q, want 408", b)
		}
	})
	// Trickling a header byte by byte does not extend the deadline: it is
	// for the whole header, not per read.
	t.Run("trickle", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.WriteString(c, "GET http://api.test/ HTTP/1.1\r\n")
			// 5 s of trickle: a deadline it extended would keep the
			// connection that long, far past the bound below, which
			// leaves a loaded machine seconds to deliver the 408.
			for i := 0; i < 100; i++ {
				if _, err := io.WriteString(c, "X: y\r\n"); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		el := time.Since(start)
		c.Close()
		<-done
		if isTimeout(err) || el > 3*time.Second {
			t.Fatalf("a trickled header kept the connection for %v", el)
		}
		if len(b) > 0 && !bytes.HasPrefix(b, []byte("HTTP/1.1 408 ")) {
			t.Errorf("got %q, want 408", b)
		}
	})
	as := waitAttempts(t, p, 2)
	for _, a := range as {
		if a.Allowed || !strings.Contains(a.Reason, "header timeout of 300ms") {
			t.Errorf("attempt = %+v", a)
		}
	}
	if status, _ := get(t, proxyClient(t, addr, nil), "http://api.test/"); status != 200 {
		t.Errorf("after slowloris: %d", status)
	}
}

func TestGarbage(t *testing.T) {
	be := newBackend(t, echoHandler)
	p, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}, HeaderTimeout: 2 * time.Second})
	for _, tc := range []struct {
		name, raw string
		status    int
		reason    string
	}{
		{"binary", "\x00\x01\x02\xff garbage\r\n\r\n", 400, "malformed request"},
		{"no version", "GARBAGE\r\n\r\n", 400, "malformed request"},
		{"bad method", "G(T http://api.test/ HTTP/1.1\r\n\r\n", 400, "malformed request"},
		{"bad header", "GET http://api.test/ HTTP/1.1\r\nBad Header\r\n\r\n", 400, "malformed request"},
		{"two lengths", "POST http://api.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "malformed request"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 501, `method "PRI" is not one the proxy serves`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := exchange(t, addr, tc.raw)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
		})
	}
	// Endless headers: a flood of fields, and one line without an end.
	for _, flood := range []struct{ name, start, unit string }{
		{"many fields", "GET http://api.test/ HTTP/1.1\r\n", "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"},
		{"endless line", "GET http://api.test/", strings.Repeat("a", 1000)},
	} {
		t.Run(flood.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			done := make(chan struct{})
			go func() {
				defer close(done)
				io.WriteString(c, flood.start)
				for i := 0; i < 4096; i++ { // up to 4 MB
					if _, err := io.WriteString(c, flood.unit); err != nil {
						return
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			c.Close()
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 431 {
				t.Errorf("got %d, want 431", resp.StatusCode)
			}
		})
	}
	// SOCKS4 and a cut-off SOCKS5 greeting.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{4, 1, 0, 80, 127, 0, 0, 1, 0})
	b, _ := io.ReadAll(c)
	c.Close()
	if !bytes.Equal(b, []byte{0, 91, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("SOCKS4 got %v, want a rejection", b)
	}
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{5, 3, 0})
	c.Close()

	as := waitAttempts(t, p, 10)
	for _, a := range as {
		if a.Allowed || a.Reason == "" && a.Error == "" {
			t.Errorf("attempt = %+v", a)
		}
	}
	if h := be.hits.Load(); h != 0 {
		t.Errorf("garbage reached the destination %d times", h)
	}
	if status, _ := get(t, proxyClient(t, addr, nil), "http://api.test/"); status != 200 {
		t.Errorf("after garbage: %d", status)
	}
}

func connectTunnel(t *testing.T, addr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// TestIdleTimeout: a tunnel silent both ways is cut at the idle timeout,
// and one busy either way is not. The timeout is 1 s and the traffic
// lasts 3 s, in 100 ms steps: a loaded CI machine can delay one step by
// hundreds of ms, which cut a 300 ms timeout's tunnel once.
func TestIdleTimeout(t *testing.T) {
	const ticks = 30 // 3 s at 100 ms, three times the idle timeout
	echo := echoServer(t)
	ticker := tcpServer(t, func(c net.Conn) {
		for i := 0; i < ticks; i++ {
			if _, err := c.Write([]byte{'.'}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	const idle = time.Second
	p, addr := startProxy(t, Config{
		Allow:       []string{"echo.test", "tick.test"},
		Resolve:     map[string]string{"echo.test": echo, "tick.test": ticker},
		IdleTimeout: idle,
	})

	t.Run("busy both ways", func(t *testing.T) {
		c, br := connectTunnel(t, addr, "echo.test:7")
		buf := make([]byte, 4)
		var start time.Time
		for i := 0; i < ticks; i++ {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			// Before the write: the proxy's idle clock starts at the
			// last byte it relays, which is after this.
			start = time.Now()
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			if _, err := io.ReadFull(br, buf); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		// Then silence: cut after the idle timeout.
		_, err := br.ReadByte()
		if el := time.Since(start); isTimeout(err) || el < idle || el > 5*time.Second {
			t.Errorf("silent tunnel cut %v after the last write (%v), want about %v", el, err, idle)
		}
	})
	// Bytes in one direction keep the connection alive: idleness is
	// silence both ways.
	t.Run("busy one way", func(t *testing.T) {
		_, br := connectTunnel(t, addr, "tick.test:7")
		for i := 0; i < ticks; i++ {
			if _, err := br.ReadByte(); err != nil {
				t.Fatalf("tick %d: %v", i, err)
			}
		}
	})
	as := waitAttempts(t, p, 2)
	if a := findAttempt(t, as, "CONNECT", "echo.test"); a.Error != "idle for 1s" || a.BytesUp != 4*ticks || a.BytesDown != 4*ticks {
		t.Errorf("attempt = %+v", a)
	}
	if a := findAttempt(t, as, "CONNECT", "tick.test"); a.Error != "" || a.BytesDown != ticks {
		t.Errorf("attempt = %+v", a)
	}
}

// A destination that never answers an HTTP request is cut at the idle
// timeout, and the client hears 502.
func TestIdleDestination(t *testing.T) {
	stall := tcpServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	p, addr := startProxy(t, Config{Allow: []string{"stall.test"}, Resolve: map[string]string{"stall.test": stall}, IdleTimeout: 200 * time.Millisecond})
	resp, body := exchange(t, addr, "GET http://stall.test/ HTTP/1.1\r\nHost: stall.test\r\n\r\n")
	if resp.StatusCode != 502 || !strings.Contains(body, "idle for 200ms") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if a := waitAttempts(t, p, 1)[0]; !a.Allowed || !strings.Contains(a.Error, "idle for 200ms") {
		t.Errorf("attempt = %+v", a)
	}
}

// Resolving and dialling are the proxy's time, not the client's: a slow
// dial does not count towards the idle timeout. The dial takes 1.5 s, past
// the 1 s timeout, which leaves the exchange after it a second (at 200 ms
// a loaded machine's request and reply took longer once).
func TestSlowDialIsNotIdle(t *testing.T) {
	be := newBackend(t, echoHandler)
	slow := func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(1500 * time.Millisecond)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	_, addr := startProxy(t, Config{Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()}, Dial: slow, IdleTimeout: time.Second})
	if status, body := get(t, proxyClient(t, addr, nil), "http://api.test/slow"); status != 200 {
		t.Errorf("after a slow dial: %d %q", status, body)
	}
}

// Close ends everything in flight, including a resolve that would never
// return by itself, and leaves no goroutine (checked by startProxy) and no
// socket behind.
func TestCloseLeavesNothing(t *testing.T) {
	echo := echoServer(t)
	release := make(chan struct{})
	inHandler := make(chan struct{}, 1)
	hang := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		inHandler <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	resolving := make(chan struct{})
	resolver := func(ctx context.Context, host string) ([]netip.Addr, error) {
		close(resolving)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p, addr := startProxy(t, Config{
		Allow:    []string{"echo.test", "hang.test", "slowdns.test"},
		Resolve:  map[string]string{"echo.test": echo, "hang.test": hang.addr()},
		Resolver: resolver,
	})
	tunnel, tbr := connectTunnel(t, addr, "echo.test:7")
	tunnel.Write([]byte("x"))
	tbr.ReadByte()

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	clients := []net.Conn{tunnel, silent}
	for _, target := range []string{"hang.test", "slowdns.test"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		clients = append(clients, c)
	}
	for _, ch := range []<-chan struct{}{inHandler, resolving} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("the hanging request or the slow resolve never started")
		}
	}
	waitActive(t, p, 4)

	start := time.Now()
	p.Close()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v", el)
	}
	checkNoGoroutines(t)
	if s := socketsOn(t, portOf(t, addr), portOf(t, echo)); len(s) > 0 {
		t.Errorf("proxy sockets left after Close: %v", s)
	}
	if s := socketsOn(t, -1, portOf(t, hang.addr())); len(s) > 0 {
		t.Errorf("upstream sockets left after Close: %v", s)
	}
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(c); isTimeout(err) {
			t.Errorf("client %d: its connection is still open", i)
		}
	}
	as := p.Attempts()
	if len(as) != 4 {
		t.Fatalf("%d attempts after Close, want 4: %+v", len(as), as)
	}
	if a := findAttempt(t, as, "CONNECT", "echo.test"); a.Error != "proxy closed" {
		t.Errorf("tunnel attempt = %+v", a)
	}
	if a := findAttempt(t, as, "GET", "hang.test"); a.Error != "proxy closed" {
		t.Errorf("hanging request attempt = %+v", a)
	}
	if a := findAttempt(t, as, "GET", "slowdns.test"); !strings.Contains(a.Error, "context canceled") {
		t.Errorf("resolving attempt = %+v", a)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after Close left its listener open: %v", err)
	}
}

func TestAttemptLogIsCapped(t *testing.T) {
	p, addr := startProxy(t, Config{})
	p.mu.Lock()
	p.maxAttempts = 3
	p.mu.Unlock()
	for i := 0; i < 5; i++ {
		exchange(t, addr, "GET http://no.test/ HTTP/1.1\r\nHost: no.test\r\n\r\n")
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.AttemptsDropped() != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n, d := len(waitAttempts(t, p, 3)), p.AttemptsDropped(); n != 3 || d != 2 {
		t.Errorf("%d attempts kept, %d dropped; want 3 and 2", n, d)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"bad allow", Config{Allow: []string{"*.com"}}, `allow pattern "*.com"`},
		{"pin value", Config{Resolve: map[string]string{"api.test:80": "not-an-ip"}}, `resolve pin "api.test:80" -> "not-an-ip": "not-an-ip" is not an IP address`},
		{"pin key address", Config{Resolve: map[string]string{"1.2.3.4": "127.0.0.1"}}, "must be a name"},
		{"pin key wildcard", Config{Resolve: map[string]string{"*.x.test": "127.0.0.1"}}, `resolve pin "*.x.test"`},
		{"pin key port", Config{Resolve: map[string]string{"api.test:0": "127.0.0.1"}}, "1 to 65535"},
		{"pin value port", Config{Resolve: map[string]string{"api.test": "127.0.0.1:99999"}}, "1 to 65535"},
		{"pin zone", Config{Resolve: map[string]string{"api.test": "fe80::1%lo"}}, "zone"},
		{"pin twice", Config{Resolve: map[string]string{"api.test": "127.0.0.1", "API.test.": "127.0.0.2"}}, "pinned twice"},
		{"negative conns", Config{MaxConns: -1}, "MaxConns -1"},
		{"negative bytes", Config{MaxBytesDown: -1}, "negative"},
		{"negative timeout", Config{IdleTimeout: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Several addresses, v6 with a port, and a pin for one port.
	p, err := New(Config{Resolve: map[string]string{"a.test": "127.0.0.1, [::1]:8080", "a.test:443": "10.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := fmt.Sprint(p.pins[pinKey{"a.test", 0}], p.pins[pinKey{"a.test", 443}]); got != "[127.0.0.1:0 [::1]:8080] [10.0.0.1:0]" {
		t.Errorf("pins = %s", got)
	}
}
