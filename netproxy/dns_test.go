package netproxy

import (
	"net"
	"net/netip"
	"testing"

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
		{"api.test", netip.MustParseAddrPort("127.1.0.1:80")},
		{"api.test", netip.MustParseAddrPort("127.1.0.1:443")},
		{"api.test", netip.MustParseAddrPort("127.1.0.1:8080")},
		{"db.test", netip.MustParseAddrPort("127.1.0.2:5432")},
	}
	if got := p.Forwards(); len(got) != len(want) || got[0] != want[0] || got[2] != want[2] || got[3] != want[3] {
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
	for _, n := range []string{"evil.test.", "x.wild.test.", "evil.test."} {
		if h, _ = ask(n, dnsmessage.TypeA); h.RCode != dnsmessage.RCodeNameError {
			t.Errorf("A %s: rcode %v, want NXDOMAIN", n, h.RCode)
		}
	}
	c.Write([]byte("garbage that is not a DNS message"))
	ask("api.test.", dnsmessage.TypeA) // the garbage got no answer; this one is read after it
	p.Close()
	a := p.Attempts()
	if len(a) != 2 || a[0].Kind != KindDNS || a[0].Host != "evil.test" || a[0].Allowed || a[1].Host != "x.wild.test" {
		t.Errorf("attempts %+v, want one dns record per refused name", a)
	}
	s := p.Summary()
	if s.DNS.Queries != 7 || s.DNS.Refused != 3 || s.DNS.Malformed != 1 {
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
