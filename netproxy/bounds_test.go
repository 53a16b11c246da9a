package netproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Issue 11, finding 1: a method may be any token up to the header cap, and
// it used to be recorded as is. Unknown methods get 501 after at most
// maxMethodLen+1 bytes, and the record holds a bounded method.
func TestUnknownMethods(t *testing.T) {
	be := newBackend(t, echoHandler)
	dial := &recordingDial{}
	p, addr := startProxy(t, Config{Allow: []string{"a.test"}, Resolve: map[string]string{"a.test": be.addr()}, Dial: dial.dial})
	for _, tc := range []struct {
		name, line string
		status     int
		method     string // Attempt.Method
		reason     string
	}{
		{"a 64 KiB method", strings.Repeat("A", 65400) + " http://a.test/ HTTP/1.1", 501, "AAAAAAAA...", `method "AAAAAAAA..." is not one the proxy serves`},
		{"ampersands", strings.Repeat("&", 30000) + " http://a.test/ HTTP/1.1", 501, "&&&&&&&&...", "is not one the proxy serves"},
		{"lower case", "get http://a.test/ HTTP/1.1", 501, "get", `method "get"`},
		{"WebDAV", "PROPFIND http://a.test/ HTTP/1.1", 501, "PROPFIND...", "PROPFIND"},
		{"made up", "BREW http://a.test/ HTTP/1.1", 501, "BREW", `method "BREW"`},
		{"empty method", " http://a.test/ HTTP/1.1", 400, "", "not an HTTP request line"},
		{"control byte", "GE\x01T http://a.test/ HTTP/1.1", 400, "", "not an HTTP request line"},
		{"tab", "GET\thttp://a.test/ HTTP/1.1", 400, "", "not an HTTP request line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(p.Attempts())
			resp, body := exchange(t, addr, tc.line+"\r\nHost: a.test\r\n\r\n")
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.reason)
			}
			a := waitAttempts(t, p, n+1)[n]
			if a.Allowed || a.Method != tc.method || !strings.Contains(a.Reason, tc.reason) || a.Host != "" {
				t.Errorf("attempt = %+v, want method %q and reason %q", a, tc.method, tc.reason)
			}
			if n := recordSize(a); n > 400 {
				t.Errorf("record of %d bytes: %+v", n, a)
			}
		})
	}
	// Every known method still goes through.
	for _, m := range knownMethods {
		if m == http.MethodConnect {
			continue
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, m+" http://a.test/m HTTP/1.1\r\nHost: a.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: m})
		c.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v, want 200", m, resp, err)
		}
	}
	if got := len(dial.list()); got != len(knownMethods)-1 {
		t.Errorf("%d dials, want one per known method but CONNECT", got)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ..."},
		{"ééééé", 8, "éé..."}, // 2-byte runes: a cut never splits one
		{strings.Repeat("x", 1<<20), 16, strings.Repeat("x", 13) + "..."},
	} {
		got := clip(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("clip(%.20q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	big := strings.Repeat("\x01é&", 1<<16)
	a := bounded(Attempt{Method: big, Host: big, Reason: big, Error: big, Addr: big})
	if len(a.Method) > maxRecordMethod || len(a.Host) > maxRecordHost || len(a.Reason) > maxRecordText || len(a.Error) > maxRecordText || len(a.Addr) > maxRecordAddr {
		t.Errorf("bounded left %d %d %d %d %d bytes", len(a.Method), len(a.Host), len(a.Reason), len(a.Error), len(a.Addr))
	}
	// A control byte takes 6 bytes in JSON: the bound on a record's
	// encoding is 6 times its fields, plus the fixed keys.
	if n := recordSize(a); n > 6*(maxRecordMethod+maxRecordHost+2*maxRecordText+maxRecordAddr)+256 {
		t.Errorf("record of %d bytes", n)
	}
}

// The log stops at MaxAttemptBytes of records, not only at MaxAttempts,
// and the summary counts what it dropped.
func TestAttemptLogByteCap(t *testing.T) {
	p, addr := startProxy(t, Config{})
	p.mu.Lock()
	p.maxLogBytes = 2000
	p.mu.Unlock()
	const n = 30
	for i := 0; i < n; i++ {
		exchange(t, addr, fmt.Sprintf("GET http://%s.test/ HTTP/1.1\r\nHost: x\r\n\r\n", strings.Repeat("n", 60)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Summary().Recorded+p.Summary().Dropped < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	as := p.Attempts()
	size := 0
	for _, a := range as {
		size += recordSize(a)
	}
	s := p.Summary()
	if size > 2000 || len(as) == 0 || len(as) == n || s.Recorded != len(as) || s.Dropped != n-len(as) || s.Attempts != n || !s.Truncated() {
		t.Errorf("%d records of %d bytes kept, summary %+v; want some kept, within 2000 bytes, the rest dropped", len(as), size, s)
	}
	b, _ := json.Marshal(as)
	if len(b) > 2000+len(as)+2 {
		t.Errorf("the log encodes to %d bytes", len(b))
	}
}

// Issue 11, finding 9: refusals draw on a token bucket; past it,
// connections are closed unread, and counted.
func TestRefusalRateLimit(t *testing.T) {
	be := newBackend(t, echoHandler)
	p, addr := startProxy(t, Config{
		Allow: []string{"api.test"}, Resolve: map[string]string{"api.test": be.addr()},
		RefusalBurst: 5, RefusalRate: 1e-6,
	})
	// Allowed requests give their token back: any number of them pass.
	for i := 0; i < 20; i++ {
		if resp, _ := exchange(t, addr, "GET http://api.test/ok HTTP/1.1\r\nHost: api.test\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("allowed request %d: %d", i, resp.StatusCode)
		}
	}
	pad := "X-Pad: " + strings.Repeat("a", 20<<10) + "\r\n"
	statuses := map[int]int{}
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		go func() { io.WriteString(c, "GET http://evil.test/ HTTP/1.1\r\n"+pad+"\r\n") }()
		b, _ := io.ReadAll(c)
		c.Close()
		switch {
		case bytes.HasPrefix(b, []byte("HTTP/1.1 403 ")):
			statuses[403]++
		case len(b) == 0 || bytes.HasPrefix(b, []byte("HTTP/1.1 429 ")):
			statuses[429]++ // a reset may destroy the 429
		default:
			t.Fatalf("refusal %d: %q", i, b)
		}
	}
	if statuses[403] != 5 || statuses[429] != 35 {
		t.Errorf("answers %v, want 5 refusals, then 35 closed unread", statuses)
	}
	// Past the budget even an allowed request is closed unread: the
	// proxy cannot tell it from the flood without reading it.
	exchangeOrClosed(t, addr)
	p.Close()
	s := p.Summary()
	if s.Refused != 5 || s.RateLimited != 36 || s.Attempts != 61 || s.Recorded != 25 || !s.Truncated() {
		t.Errorf("summary %+v", s)
	}
	if h := be.hits.Load(); h != 20 {
		t.Errorf("the destination got %d requests, want 20", h)
	}
}

func exchangeOrClosed(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET http://api.test/ok HTTP/1.1\r\nHost: api.test\r\n\r\n")
	b, _ := io.ReadAll(c)
	if len(b) > 0 && !bytes.HasPrefix(b, []byte("HTTP/1.1 429 ")) {
		t.Errorf("over the refusal budget: %q", b)
	}
}

// The bucket refills: after a pause the proxy serves refusals again. The
// rate is 1 a second so that the three refusals "at once" have a second
// to end in before a token comes back: at 20 a second (50 ms) a loaded CI
// machine once got the third one answered.
func TestRefusalRateRefills(t *testing.T) {
	p, addr := startProxy(t, Config{RefusalBurst: 2, RefusalRate: 1})
	refused := func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET http://no.test/ HTTP/1.1\r\nHost: no.test\r\n\r\n")
		b, _ := io.ReadAll(c)
		return bytes.HasPrefix(b, []byte("HTTP/1.1 403 "))
	}
	for i := 0; i < 2; i++ {
		if !refused() {
			t.Fatalf("refusal %d within the burst was not answered", i)
		}
	}
	if refused() {
		t.Fatal("a third refusal at once was answered, want it rate-limited")
	}
	time.Sleep(2100 * time.Millisecond) // 2 tokens at 1/s, the cap
	if !refused() {
		t.Error("after the refill: rate-limited")
	}
	p.Close()
	if s := p.Summary(); s.RateLimited != 1 || s.Refused != 3 {
		t.Errorf("summary %+v", s)
	}
}
