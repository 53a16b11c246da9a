package netproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
)

// SOCKS5, RFC 1928: no authentication, CONNECT only. Names sent as ATYP 3
// (socks5h://) are checked and resolved here like HTTP targets; a client
// that resolves for itself has no DNS in the sandbox and sends IP literals,
// which must then be on the allowlist.
const socks5Version = 5

// Reply codes, RFC 1928 §6.
const (
	socksSucceeded       = 0
	socksFailure         = 1
	socksNotAllowed      = 2
	socksHostUnreachable = 4
	socksRefused         = 5
	socksCmdUnsupported  = 7
	socksAddrUnsupported = 8
)

func (s *session) serveSOCKS(br *bufio.Reader, hl *headerLimit) {
	s.rec.Method = "SOCKS5"
	// Greeting: VER NMETHODS METHODS (§3).
	var g [2]byte
	if !s.socksRead(br, g[:]) {
		return
	}
	methods := make([]byte, g[1])
	if !s.socksRead(br, methods) {
		return
	}
	if !bytes.Contains(methods, []byte{0}) {
		s.clk.endHeader()
		s.rec.Reason = "SOCKS5 client offers no method without authentication"
		s.say([]byte{socks5Version, 0xff})
		return
	}
	if _, err := s.cm.Write([]byte{socks5Version, 0}); err != nil {
		s.fail(err)
		return
	}
	// Request: VER CMD RSV ATYP DST.ADDR DST.PORT (§4).
	var h [4]byte
	if !s.socksRead(br, h[:]) {
		return
	}
	if h[0] != socks5Version {
		s.clk.endHeader()
		s.socksRefuse(socksFailure, fmt.Sprintf("malformed SOCKS5 request: version %d", h[0]))
		return
	}
	var host string
	var ip netip.Addr
	switch h[3] {
	case 1:
		var a [4]byte
		if !s.socksRead(br, a[:]) {
			return
		}
		ip = netip.AddrFrom4(a)
	case 4:
		var a [16]byte
		if !s.socksRead(br, a[:]) {
			return
		}
		ip = netip.AddrFrom16(a).Unmap()
	case 3:
		var n [1]byte
		if !s.socksRead(br, n[:]) {
			return
		}
		name := make([]byte, n[0])
		if !s.socksRead(br, name) {
			return
		}
		host = string(name)
	default:
		s.clk.endHeader()
		s.socksRefuse(socksAddrUnsupported, fmt.Sprintf("SOCKS5 address type %d is not supported", h[3]))
		return
	}
	var pb [2]byte
	if !s.socksRead(br, pb[:]) {
		return
	}
	s.clk.endHeader()
	hl.lift()
	port := int(binary.BigEndian.Uint16(pb[:]))
	if !ip.IsValid() {
		name, lit, err := parseHost(host, false)
		if err != nil {
			s.socksRefuse(socksFailure, fmt.Sprintf("SOCKS5 target: %v", err))
			return
		}
		host, ip = name, lit
	}
	if ip.IsValid() {
		host = ip.String()
	}
	s.rec.Host, s.rec.Port = host, port
	switch {
	case h[1] != 1:
		s.socksRefuse(socksCmdUnsupported, fmt.Sprintf("SOCKS5 command %d is not supported, only CONNECT (1)", h[1]))
		return
	case port == 0:
		s.socksRefuse(socksFailure, "SOCKS5 target port 0")
		return
	}
	if r := s.open(host, ip, port); r != nil {
		code := byte(socksNotAllowed)
		if r.allowed {
			s.rec.Error = r.reason
			code = socksHostUnreachable
			if errors.Is(r.err, syscall.ECONNREFUSED) {
				code = socksRefused
			}
		} else {
			s.rec.Reason = r.reason
		}
		s.socksReply(code)
		return
	}
	// BND.ADDR is left 0.0.0.0:0: the proxy's host-side address is none of
	// the payload's business.
	if err := s.socksReply(socksSucceeded); err != nil {
		s.fail(err)
		return
	}
	s.tunnel(br)
}

// socksRead reads exactly len(b) bytes of the handshake, and on failure
// records why and reports false.
func (s *session) socksRead(br *bufio.Reader, b []byte) bool {
	if _, err := io.ReadFull(br, b); err != nil {
		s.clk.endHeader()
		switch {
		case errors.Is(err, errHeaderTimeout):
			s.rec.Reason = fmt.Sprintf("SOCKS5 handshake not complete within the header timeout of %v", s.p.header)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			s.fail(errors.New("SOCKS5 handshake cut short"))
		default:
			s.fail(err)
		}
		return false
	}
	return true
}

func (s *session) socksRefuse(code byte, reason string) {
	s.rec.Reason = oneLine(reason)
	s.socksReply(code)
}

func (s *session) socksReply(code byte) error {
	return s.say([]byte{socks5Version, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
