package netproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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
	port := int(s.fw.Port)
	name := s.fw.Name
	if name == "" {
		// A wildcard's address: the name it went to, if any yet.
		name = s.p.wildName(forwardAddr(*s.fw).Addr())
	}
	s.rec = Attempt{Kind: KindForward, Host: name, Port: port, Method: "TCP"}
	if name == "" {
		s.rec.Host = forwardAddr(*s.fw).Addr().String()
		s.rec.Reason = fmt.Sprintf("%s is one of %s's addresses, and no name under it was looked up for it", forwardAddr(*s.fw).Addr(), s.fw.Pattern)
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

// ServeRefusedSYNs reads f, a packet socket inside the sandbox that sees
// each TCP SYN sent to a reserved address (the IP header first), until f
// is closed, and records one refused attempt (Kind KindForward) for each
// SYN to a reserved address and a port that has no listener: the
// sandbox's kernel refuses it with an RST, and this is how the Result
// learns of it (issue 18). SYNs to a listener are left to ServeForward.
//
// Records draw on the refusal bucket; past it the loop does not read and
// the socket's small receive buffer lets the kernel drop the flood; the
// kernel's drop count is taken into the summary as rate-limited attempts
// after each wait and at Close, when what is still queued is read before
// the socket goes.
func (p *Proxy) ServeRefusedSYNs(f *os.File) error {
	queued, drops, done := queuedReader(f)
	dropped := func() {
		if n := drops(); n > 0 {
			p.mu.Lock()
			p.accepted += n
			p.rateLimited += n
			p.mu.Unlock()
		}
	}
	if !p.addCloser(f) {
		done()
		return ErrClosed
	}
	p.mu.Lock()
	p.dnsFinal = append(p.dnsFinal, func() {
		b := make([]byte, synSnap)
		for range maxQueuedSYNs {
			n := queued(b)
			if n == 0 {
				break
			}
			if dst, ok := synDest(b[:n]); ok {
				p.refusedSYN(dst)
			}
		}
		dropped()
	})
	p.mu.Unlock()
	defer p.dropCloser(f)
	defer done() // after f is closed, so that the dup's close is the last
	buf := make([]byte, synSnap)
	for {
		slept, live := p.waitToken(p.untilToken)
		if !live {
			return nil
		}
		if slept {
			dropped()
		}
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || p.isClosed() {
				return nil
			}
			if temporary(err) {
				continue
			}
			return err
		}
		if dst, ok := synDest(buf[:n]); ok {
			p.refusedSYN(dst)
		}
	}
}

// synSnap is what the SYN watch's filter keeps of a packet (the largest
// IP header and the TCP ports); maxQueuedSYNs bounds the read at Close
// (the receive buffer holds fewer).
const (
	synSnap       = 128
	maxQueuedSYNs = 256
)

// synDest is the destination of an IPv4 TCP segment that starts at b, or
// false when b is too short to hold it.
func synDest(b []byte) (netip.AddrPort, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return netip.AddrPort{}, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl+4 {
		return netip.AddrPort{}, false
	}
	addr := netip.AddrFrom4([4]byte(b[16:20]))
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(b[ihl+2:])), true
}

// refusedSYN records a connection to dst when dst's address is reserved
// and its port has no listener.
func (p *Proxy) refusedSYN(dst netip.AddrPort) {
	var name, pattern string
	reserved := false
	for _, fw := range p.forwards {
		if forwardAddr(fw) == dst {
			return // ServeForward has it
		}
		if forwardAddr(fw).Addr() == dst.Addr() {
			reserved, name, pattern = true, fw.Name, fw.Pattern
		}
	}
	if !reserved {
		return
	}
	if name == "" {
		name = p.wildName(dst.Addr())
	}
	host, why := name, fmt.Sprintf("port %d is not allowed for %s: the connection was refused", dst.Port(), name)
	if name == "" {
		host = dst.Addr().String()
		why = fmt.Sprintf("port %d is not allowed for %s's addresses: the connection was refused", dst.Port(), pattern)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted++
	if !p.refusals.take() {
		p.rateLimited++
		return
	}
	p.refused++
	p.fileRecord(p.record(), Attempt{Kind: KindForward, Host: host, Port: int(dst.Port()), Method: "TCP", Reason: why})
}
