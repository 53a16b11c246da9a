package netproxy

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
)

// ServeForward accepts connections on l, the sandbox's listener on fw's
// reserved address and port, until l is closed, and carries each one to
// fw.Name:port through the same path as CONNECT: the allowlist, the address
// checks, the caps and one record each (Kind KindForward). The bytes pass
// through untouched, so TLS reaches the destination with the client's SNI,
// which is fw.Name: the name the client looked up.
func (p *Proxy) ServeForward(l net.Listener, fw Forward) error {
	return p.serve(l, &fw)
}

// forwardTCP is a session on a transparent listener: there is no request
// to read, the destination is the listener's.
func (s *session) forwardTCP() {
	s.clk.endHeader()
	port := int(s.fw.Addr.Port())
	name := s.fw.Name
	if name == "" {
		// A wildcard's address: the name it went to, if any yet.
		name = s.p.wildName(s.fw.Addr.Addr())
	}
	s.rec = Attempt{Kind: KindForward, Host: name, Port: port, Method: "TCP"}
	if name == "" {
		s.rec.Host = s.fw.Addr.Addr().String()
		s.rec.Reason = fmt.Sprintf("%s is one of %s's addresses, and no name under it was looked up for it", s.fw.Addr.Addr(), s.fw.Pattern)
		return
	}
	if r := s.open(name, netip.Addr{}, port); r != nil {
		if r.allowed {
			s.rec.Allowed, s.rec.Error = true, oneLine(r.reason)
		} else {
			s.rec.Reason = oneLine(r.reason)
		}
		return // the client sees the connection closed
	}
	s.tunnel(bufio.NewReaderSize(s.cm, 4096))
}
