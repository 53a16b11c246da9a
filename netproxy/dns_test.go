package netproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
	m, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDNSAnswers(t *testing.T) {
	p, err := New(Config{Allow: []string{"api.test", "db.test:5432", "*.wild.test", "10.0.0.1"}, Resolve: map[string]string{"api.test:8080": "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := []Forward{
		{Name: "api.test", IP: [4]byte{127, 1, 0, 1}, Port: 80},
		{Name: "api.test", IP: [4]byte{127, 1, 0, 1}, Port: 443},
		{Name: "api.test", IP: [4]byte{127, 1, 0, 1}, Port: 8080},
		{Name: "db.test", IP: [4]byte{127, 1, 0, 2}, Port: 5432},
	}
	if got := p.Forwards(); len(got) != len(want)+2*WildcardAddrs || got[len(want)].Pattern != "*.wild.test" || got[0] != want[0] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("Forwards = %v, want %v", got, want)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.ServeDNS(pc)
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func(name string, typ dnsmessage.Type) (dnsmessage.Header, []dnsmessage.Resource) {
		c.Write(query(t, name, typ))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		return m.Header, m.Answers
	}
	h, ans := ask("API.test.", dnsmessage.TypeA)
	if h.RCode != dnsmessage.RCodeSuccess || len(ans) != 1 || ans[0].Body.(*dnsmessage.AResource).A != [4]byte{127, 1, 0, 1} || h.ID != 7 {
		t.Errorf("A api.test: %+v %+v", h, ans)
	}
	if h, ans = ask("db.test.", dnsmessage.TypeAAAA); h.RCode != dnsmessage.RCodeSuccess || len(ans) != 0 {
		t.Errorf("AAAA db.test: %+v %+v", h, ans)
	}
	for _, n := range []string{"evil.test.", "wild.test.", "evil.test."} {
		if h, _ = ask(n, dnsmessage.TypeA); h.RCode != dnsmessage.RCodeNameError {
			t.Errorf("A %s: rcode %v, want NXDOMAIN", n, h.RCode)
		}
	}
	// Under the wildcard: addresses of the pool after the exact names,
	// in the order asked, the same one again for the same name.
	for i, n := range []string{"x.wild.test.", "y.wild.test.", "X.wild.test."} {
		want := [4]byte{127, 1, 0, 3}
		if i == 1 {
			want[3] = 4
		}
		if h, ans = ask(n, dnsmessage.TypeA); h.RCode != dnsmessage.RCodeSuccess || len(ans) != 1 || ans[0].Body.(*dnsmessage.AResource).A != want {
			t.Errorf("A %s: %+v %+v, want %v", n, h, ans, want)
		}
	}
	// Read as a header, the garbage claims thousands of questions: FORMERR.
	c.Write([]byte("garbage that is not a DNS message"))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil || m.RCode != dnsmessage.RCodeFormatError {
		t.Errorf("garbage: %v, rcode %v, want FORMERR", err, m.RCode)
	}
	ask("api.test.", dnsmessage.TypeA)
	p.Close()
	a := p.Attempts()
	if len(a) != 2 || a[0].Kind != KindDNS || a[0].Host != "evil.test" || a[0].Allowed || a[1].Host != "wild.test" {
		t.Errorf("attempts %+v, want one dns record per refused name", a)
	}
	s := p.Summary()
	if s.DNS.Queries != 10 || s.DNS.Refused != 3 || s.DNS.Malformed != 1 {
		t.Errorf("summary %+v", s.DNS)
	}
}

func TestNoProxy(t *testing.T) {
	for allow, want := range map[string]string{
		"api.test":        "localhost,127.0.0.1,::1",
		"127.0.0.1:18081": "localhost,::1",
	} {
		p, err := New(Config{Allow: []string{allow}})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.NoProxy(); got != want {
			t.Errorf("allow %s: NoProxy %q, want %q", allow, got, want)
		}
		p.Close()
	}
}

// TestDNSOverTCP: length-prefixed queries on one connection are answered
// in turn; an oversized length closes it and counts as malformed; an
// oversized datagram is refused and counted.
func TestDNSOverTCP(t *testing.T) {
	p, err := New(Config{Allow: []string{"api.test"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.ServeDNSTCP(l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"api.test.", "nope.test."} {
		q := query(t, name, dnsmessage.TypeA)
		c.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf); err != nil {
			t.Fatal(err)
		}
		want := dnsmessage.RCodeSuccess
		if name == "nope.test." {
			want = dnsmessage.RCodeNameError
		}
		if m.RCode != want {
			t.Errorf("%s over TCP: rcode %v, want %v", name, m.RCode, want)
		}
	}
	c.Write([]byte{0xff, 0xff})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("an oversized length left the connection open (%d, %v)", n, err)
	}

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.ServeDNS(pc)
	u, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write(make([]byte, 2000))
	u.Write(query(t, "api.test.", dnsmessage.TypeA))
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := u.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if s := p.Summary().DNS; s.Malformed != 2 || s.Queries != 5 || s.Refused != 1 {
		t.Errorf("summary %+v, want 2 malformed of 5 queries", s)
	}
}

// TestForwardsCapped: names past MaxForwards listeners get no reserved
// address (NXDOMAIN, the proxy variables still work) and are listed.
func TestForwardsCapped(t *testing.T) {
	var allow []string
	for i := range MaxForwards/2 + 2 {
		allow = append(allow, fmt.Sprintf("h%d.test", i)) // 80 and 443 each
	}
	p, err := New(Config{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if n, u := len(p.Forwards()), p.Unforwarded(); n != MaxForwards || len(u) != 2 || u[0] != allow[MaxForwards/2] {
		t.Errorf("%d forwards, unforwarded %v", n, u)
	}
	if !p.allow.Allows(allow[len(allow)-1], 80) {
		t.Errorf("an unforwarded name left the allowlist")
	}
}

// TestWildcardForward: names under a wildcard get the pattern's addresses
// in the order asked, up to WildcardAddrs; a connection to one is carried
// to the name it went to, through the same checks; an address no name went
// to is refused and recorded.
func TestWildcardForward(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	var dialled []string
	p, err := New(Config{
		Allow: []string{"*.wild.test:443"},
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil // public
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialled = append(dialled, addr)
			return net.Dial("tcp", up.Addr().String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fws := p.Forwards()
	if len(fws) != WildcardAddrs || fws[0].Pattern != "*.wild.test:443" && fws[0].Pattern != "*.wild.test" || fws[0].Port != 443 {
		t.Fatalf("forwards %+v", fws)
	}
	for i := range WildcardAddrs {
		if a, why := p.wildAddr(fmt.Sprintf("n%d.wild.test", i)); a != forwardAddr(fws[i]).Addr() {
			t.Fatalf("name %d: %v %q", i, a, why)
		}
	}
	if a, why := p.wildAddr("late.wild.test"); a.IsValid() || !strings.Contains(why, "went to other names") {
		t.Errorf("a ninth name: %v %q", a, why)
	}
	// Serve the first two addresses on local listeners standing in for
	// the sandbox's.
	for i := range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fw := fws[i]
		if i == 1 {
			p.mu.Lock()
			p.pools["wild.test"].names[1] = "" // as if no name went to it
			p.mu.Unlock()
		}
		go p.ServeForward(l, fw)
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if want := []string{"hello", ""}[i]; string(b) != want {
			t.Errorf("address %d: read %q, want %q", i, b, want)
		}
	}
	p.Close()
	a := p.Attempts()
	if len(a) != 2 || !a[0].Allowed || a[0].Host != "n0.wild.test" || a[0].Kind != KindForward || a[1].Allowed || !strings.Contains(a[1].Reason, "no name under it") {
		t.Errorf("records %+v", a)
	}
	if len(dialled) != 1 || dialled[0] != "93.184.215.14:443" {
		t.Errorf("dialled %v", dialled)
	}
}
