package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The fuzz targets drive whole sessions over loopback TCP, as a payload
// would: the bytes go in, the proxy answers and records, and each target
// checks what any input must give (issue 11, "Fuzz targets"): no panic
// (one in a session's goroutine kills the fuzz binary), exactly one record
// per connection, every record field within its bound, an answer in the
// protocol's terms, and a dial only for input that an independent reading
// of the protocol calls a well-formed request for an allowed destination.

// fuzzAllowedIP is the one address the fuzz proxy allows (with port 80),
// besides the name a.test (any port), which is pinned to it.
var fuzzAllowedIP = netip.MustParseAddr("192.0.2.1")

// fuzzDest stands in for every destination: each dial gets a pipe on which
// a canned response is written, then closed.
type fuzzDest struct{ dials atomic.Int64 }

func (d *fuzzDest) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	c, far := net.Pipe()
	go func() {
		far.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(far, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		far.Close()
	}()
	return c, nil
}

// fuzzProxy serves a proxy for a fuzz target. The refusal budget is out
// of the way: fuzzing refuses far more than any run would.
func fuzzProxy(f *testing.F) (*Proxy, string, *fuzzDest) {
	d := &fuzzDest{}
	p, err := New(Config{
		Allow:         []string{"a.test", "192.0.2.1:80"},
		Resolve:       map[string]string{"a.test": "192.0.2.1"},
		Dial:          d.dial,
		HeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second,
		RefusalBurst: 1 << 30, RefusalRate: 1e9,
	})
	if err != nil {
		f.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go p.Serve(l)
	f.Cleanup(func() { p.Close() })
	return p, l.Addr().String(), d
}

// fuzzExchange sends raw on a new connection, half-closes it and returns
// everything the proxy sent back until it closed, and the one attempt the
// connection left, which it then clears from the log so that the log never
// fills.
func fuzzExchange(t *testing.T, p *Proxy, addr string, raw []byte) ([]byte, Attempt) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.Write(raw) // the proxy may stop reading early; the close unblocks this
		c.(*net.TCPConn).CloseWrite()
	}()
	resp, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("reading the answer: %v", err)
	}
	c.Close()
	<-wrote
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		// A copy: the next connection's slot reuses the array.
		as, active := slices.Clone(p.attempts), p.active
		if active == 0 && len(as) > 0 {
			p.attempts, p.logBytes, p.logFull = p.attempts[:0], 0, false
		}
		p.mu.Unlock()
		if active == 0 && len(as) > 0 {
			if len(as) != 1 || !as[0].done {
				t.Fatalf("one connection left %d records: %+v", len(as), as)
			}
			return resp, as[0].a
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not end (%d active, %d records)", active, len(as))
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// checkBounded fails on a record with a field past its bound.
func checkBounded(t *testing.T, a Attempt) {
	t.Helper()
	if len(a.Method) > maxRecordMethod || len(a.Host) > maxRecordHost || len(a.Reason) > maxRecordText ||
		len(a.Error) > maxRecordText || len(a.Addr) > maxRecordAddr {
		t.Fatalf("record past its bounds: %+v", a)
	}
	if strings.ContainsAny(a.Reason+a.Error, "\r\n") {
		t.Fatalf("reason or error on more than one line: %+v", a)
	}
}

// FuzzHTTPRequest feeds arbitrary bytes to the HTTP side of the proxy.
func FuzzHTTPRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET http://a.test:8080/x?y=1 HTTP/1.0\r\n\r\n",
		"HEAD http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n",
		"POST http://a.test/up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello",
		"PUT http://a.test/up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n\x16\x03\x01\x00\x05hello",
		"CONNECT [::ffff:192.0.2.1]:80 HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n",
		"GET http://127.1/ HTTP/1.1\r\n\r\n",
		"GET https://a.test/ HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"get http://a.test/ HTTP/1.1\r\n\r\n",
		"PROPFIND http://a.test/ HTTP/1.1\r\n\r\n",
		strings.Repeat("A", 5000) + " http://a.test/ HTTP/1.1\r\n\r\n",
		strings.Repeat("&", 100) + " http://a.test/ HTTP/1.1\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
		"GET http://a.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", MaxHeaderBytes) + "\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	p, addr, dest := fuzzProxy(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 || raw[0] == socks5Version || raw[0] == 4 {
			return // SOCKS: FuzzSOCKS5 (and no byte: nothing to answer)
		}
		if len(raw) > 128<<10 {
			// Past what the proxy drains after a refusal (linger), the
			// close resets the connection, and the reset may discard the
			// answer before this side reads it.
			return
		}
		dials := dest.dials.Load()
		resp, a := fuzzExchange(t, p, addr, raw)
		checkBounded(t, a)
		dialled := dest.dials.Load() != dials

		// An independent reading: the request net/http parses within the
		// header cap, with a method the proxy serves.
		req, rerr := http.ReadRequest(bufio.NewReader(io.LimitReader(bytes.NewReader(raw), MaxHeaderBytes)))
		wellFormed := rerr == nil && slices.Contains(knownMethods, req.Method)
		if !wellFormed && (a.Allowed || dialled) {
			t.Fatalf("%q (%v) is not a request the proxy serves, yet it went through: %+v", clip(string(raw), 200), rerr, a)
		}
		if a.Allowed != dialled {
			t.Fatalf("allowed %v but dialled %v: %+v", a.Allowed, dialled, a)
		}
		if a.Allowed && a.Host != "a.test" && a.Host != fuzzAllowedIP.String() {
			t.Fatalf("allowed a destination off the list: %+v", a)
		}
		if wellFormed && a.Method != req.Method && a.Method != "" {
			t.Fatalf("recorded method %q for a request with method %q", a.Method, req.Method)
		}

		// The answer is HTTP; a refusal is an error status.
		if len(resp) == 0 {
			t.Fatalf("no answer to %q: %+v", clip(string(raw), 200), a)
		}
		m := http.MethodGet
		if wellFormed {
			m = req.Method
		}
		r, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(resp)), &http.Request{Method: m})
		if err != nil || r.ProtoMajor != 1 || r.ProtoMinor != 1 {
			t.Fatalf("answer %q to %q is not an HTTP/1.1 response: %v", clip(string(resp), 200), clip(string(raw), 200), err)
		}
		if !a.Allowed && r.StatusCode < 400 {
			t.Fatalf("refused with status %d: %+v", r.StatusCode, a)
		}
		if !a.Allowed && a.Reason == "" && a.Error == "" {
			t.Fatalf("refused without a reason: %+v", a)
		}
	})
}

// socksTarget is an independent reading of a SOCKS5 greeting and CONNECT
// request (RFC 1928 §3, §4): ok when the proxy may dial.
func socksTarget(b []byte) (ok bool) {
	if len(b) < 2 || b[0] != 5 {
		return false
	}
	n := int(b[1])
	if len(b) < 2+n || !bytes.Contains(b[2:2+n], []byte{0}) {
		return false
	}
	r := b[2+n:]
	if len(r) < 4 || r[0] != 5 || r[1] != 1 {
		return false
	}
	var host []byte
	var ip netip.Addr
	rest := r[4:]
	switch r[3] {
	case 1:
		if len(rest) < 4 {
			return false
		}
		ip, rest = netip.AddrFrom4([4]byte(rest[:4])), rest[4:]
	case 4:
		if len(rest) < 16 {
			return false
		}
		ip, rest = netip.AddrFrom16([16]byte(rest[:16])).Unmap(), rest[16:]
	case 3:
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return false
		}
		host, rest = rest[1:1+int(rest[0])], rest[1+int(rest[0]):]
	default:
		return false
	}
	if len(rest) < 2 {
		return false
	}
	port := binary.BigEndian.Uint16(rest)
	if port == 0 {
		return false
	}
	if host != nil {
		if a, err := netip.ParseAddr(string(host)); err == nil && a.Zone() == "" {
			ip = a.Unmap()
		} else {
			return strings.TrimSuffix(strings.ToLower(string(host)), ".") == "a.test" && !strings.HasSuffix(string(host), "..")
		}
	}
	return ip == fuzzAllowedIP && port == 80
}

// FuzzSOCKS5 feeds arbitrary bytes after the SOCKS5 version byte.
func FuzzSOCKS5(f *testing.F) {
	req := func(atyp byte, addr []byte, port uint16) []byte {
		b := []byte{1, 0, 5, 1, 0, atyp}
		if atyp == 3 {
			b = append(b, byte(len(addr)))
		}
		return binary.BigEndian.AppendUint16(append(b, addr...), port)
	}
	for _, s := range [][]byte{
		req(3, []byte("a.test"), 443),
		append(req(3, []byte("A.Test."), 80), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"...),
		req(1, fuzzAllowedIP.AsSlice(), 80),
		req(4, netip.MustParseAddr("::ffff:192.0.2.1").AsSlice(), 80),
		req(3, []byte("192.0.2.1"), 80),
		req(1, []byte{127, 0, 0, 1}, 80),
		req(1, []byte{169, 254, 169, 254}, 80),
		req(3, []byte("evil.test"), 80),
		req(3, []byte("a.test"), 0),
		req(3, []byte(strings.Repeat("x", 255)), 80),
		{2, 0, 2, 5, 1, 0, 3, 6, 'a', '.', 't', 'e', 's', 't', 0, 80}, // two methods
		{1, 2},                                  // user/password only
		{1, 0, 5, 2, 0, 1, 192, 0, 2, 1, 0, 80}, // BIND
		{1, 0, 5, 3, 0, 1, 192, 0, 2, 1, 0, 80}, // UDP ASSOCIATE
		{1, 0, 5, 1, 0, 9, 0, 80},               // address type 9
		{1, 0, 4, 1, 0, 1, 192, 0, 2, 1, 0, 80}, // request version 4
		{0},
		{},
	} {
		f.Add(s)
	}
	p, addr, dest := fuzzProxy(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := append([]byte{socks5Version}, data...)
		dials := dest.dials.Load()
		resp, a := fuzzExchange(t, p, addr, raw)
		checkBounded(t, a)
		dialled := dest.dials.Load() != dials
		if a.Method != "SOCKS5" {
			t.Fatalf("method %q, want SOCKS5: %+v", a.Method, a)
		}
		ok := socksTarget(raw)
		if !ok && (a.Allowed || dialled) {
			t.Fatalf("%x is not a CONNECT to an allowed destination, yet it went through: %+v", raw, a)
		}
		if a.Allowed != dialled {
			t.Fatalf("allowed %v but dialled %v: %+v", a.Allowed, dialled, a)
		}
		if ok && !a.Allowed {
			t.Fatalf("%x is a CONNECT to an allowed destination, yet it was refused: %+v", raw, a)
		}
		// The answer: nothing (a handshake cut short), a method
		// selection, then at most one reply, whose code says the verdict.
		switch {
		case len(resp) == 0:
		case len(resp) < 2 || resp[0] != 5:
			t.Fatalf("answer %x is not SOCKS5", resp)
		case resp[1] == 0xff:
			if len(resp) != 2 || a.Allowed {
				t.Fatalf("no acceptable method, answer %x: %+v", resp, a)
			}
		case resp[1] != 0:
			t.Fatalf("method %d selected, want 0 (no authentication)", resp[1])
		case len(resp) == 2:
			if a.Allowed {
				t.Fatalf("allowed without a reply: %+v", a)
			}
		case len(resp) < 12 || resp[2] != 5 || resp[4] != 0 || resp[5] != 1 || !bytes.Equal(resp[6:12], make([]byte, 6)):
			t.Fatalf("reply %x is not a SOCKS5 reply with a zero IPv4 bound address", resp[2:])
		case (resp[3] == socksSucceeded) != a.Allowed:
			t.Fatalf("reply code %d for %+v", resp[3], a)
		case resp[3] != socksSucceeded && len(resp) != 12:
			t.Fatalf("bytes after a refusal: %x", resp)
		}
		if !a.Allowed && a.Reason == "" && a.Error == "" {
			t.Fatalf("refused without a reason: %+v", a)
		}
	})
}
