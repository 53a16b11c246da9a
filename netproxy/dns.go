package netproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The DNS stub (issue 18). The sandbox's resolv.conf names a loopback
// address inside its network namespace whose sockets the supervisor serves:
// an allowlisted name gets an A record for a loopback address reserved for
// it for the run (Forwards), where the supervisor also listens on the
// name's allowed ports (ServeForward); anything else gets NXDOMAIN and a
// record. The stub never forwards a query anywhere: names are resolved on
// the host side only, after the allowlist check, when a connection comes.
const (
	// MaxForwards caps the reserved (address, port) listeners of a run:
	// each is a socket the supervisor holds (sent in batches: SCM_RIGHTS
	// carries at most 253 fds a message, SCM_MAX_FD, net/unix/scm.c).
	MaxForwards = 256
	// maxDNSMessage is the largest query read, UDP or TCP. A query is one
	// question, at most 255 bytes of name plus headers and an EDNS OPT
	// record; 512 is the classic UDP limit (RFC 1035 §4.2.1). Longer
	// datagrams are cut by the read and refused as malformed; a longer TCP
	// length prefix closes the connection.
	maxDNSMessage = 512
	// DefaultDNSBurst and DefaultDNSRate (a second) size the token bucket
	// that every query draws on; past it queries are dropped unanswered
	// and counted, so that a flood costs the host a fixed CPU rate.
	DefaultDNSBurst = 256
	DefaultDNSRate  = 100.0
	// MaxDNSStreams caps concurrent DNS-over-TCP connections; more are
	// closed at accept. dnsStreamTimeout bounds one connection's life.
	MaxDNSStreams    = 8
	dnsStreamTimeout = 10 * time.Second
	// dnsTTL is short: the reservation lasts only the run.
	dnsTTL = 60
)

// DefaultForwardPorts are the ports a name allowed on any port is
// forwarded on, beside the ports its --resolve pins name: the web's.
var DefaultForwardPorts = []int{80, 443}

// forwardBase is the first reserved address: 127.1.0.0/16, away from
// 127.0.0.1 (the sandbox's own services and the proxy) and 127.0.0.53.
var forwardBase = netip.AddrFrom4([4]byte{127, 1, 0, 1})

// WildcardAddrs is how many names under one wildcard pattern get an
// address of their own in a run (issue 18, point 3): the stub hands them
// out in the order names are asked for; past them a name under the
// wildcard gets NXDOMAIN, a record, and the proxy variables still work.
const WildcardAddrs = 8

// pool is a wildcard pattern's addresses and the names they went to.
type pool struct {
	addrs []netip.Addr
	names []string // p.mu; "" while free
}

// reservation is an allowlisted name's address for the run.
type reservation struct {
	addr  netip.Addr
	ports []int
}

// reserve gives each name of an exact allowlist rule an address from
// 127.1.0.0/16, in the order of the list, and the ports to listen on
// (the rule's, or DefaultForwardPorts and its pins' ports); then each
// wildcard pattern WildcardAddrs addresses, with the ports of its rules
// and of the pins of names under it. IP literals get none. Names whose
// listeners would take the run past MaxForwards get none either and are
// returned as skipped: they stay reachable through the proxy variables,
// and the stub answers NXDOMAIN for them.
func reserve(a *Allowlist, pins map[pinKey][]netip.AddrPort) (map[string]*reservation, map[string]*pool, []Forward, []string) {
	type entry struct {
		name  string // the name, or the wildcard's suffix
		wild  bool
		ports []int
	}
	var entries []*entry
	find := func(name string, wild bool) *entry {
		for _, e := range entries {
			if e.name == name && e.wild == wild {
				return e
			}
		}
		e := &entry{name: name, wild: wild}
		entries = append(entries, e)
		return e
	}
	for _, r := range a.Rules() {
		if r.Addr.IsValid() {
			continue
		}
		e := find(r.Name, r.Wild)
		add := []int{r.Port}
		if r.Port == 0 {
			add = slices.Clone(DefaultForwardPorts)
			for k := range pins {
				under := k.name == r.Name && !r.Wild || r.Wild && strings.HasSuffix(k.name, "."+r.Name)
				if under && k.port != 0 {
					add = append(add, k.port)
				}
			}
		}
		for _, p := range add {
			if !slices.Contains(e.ports, p) {
				e.ports = append(e.ports, p)
			}
		}
	}
	// Exact names first, so that wildcards cannot push them out.
	slices.SortStableFunc(entries, func(x, y *entry) int {
		if x.wild == y.wild {
			return 0
		}
		if x.wild {
			return 1
		}
		return -1
	})
	res := map[string]*reservation{}
	pools := map[string]*pool{}
	var fw []Forward
	var skipped []string
	next := forwardBase
	for _, e := range entries {
		slices.Sort(e.ports)
		n := 1
		if e.wild {
			n = WildcardAddrs
		}
		if len(fw)+n*len(e.ports) > MaxForwards {
			if e.wild {
				skipped = append(skipped, "*."+e.name)
			} else {
				skipped = append(skipped, e.name)
			}
			continue
		}
		if !e.wild {
			res[e.name] = &reservation{addr: next, ports: e.ports}
			for _, p := range e.ports {
				fw = append(fw, Forward{Name: e.name, IP: next.As4(), Port: uint16(p)})
			}
			next = next.Next()
			continue
		}
		pl := &pool{names: make([]string, n)}
		for range n {
			pl.addrs = append(pl.addrs, next)
			for _, p := range e.ports {
				fw = append(fw, Forward{Pattern: "*." + e.name, IP: next.As4(), Port: uint16(p)})
			}
			next = next.Next()
		}
		pools[e.name] = pl
	}
	return res, pools, fw, skipped
}

// wildAddr returns the address of name under a wildcard pattern, giving it
// the pattern's next free one the first time, or why there is none ("":
// no wildcard covers name).
func (p *Proxy) wildAddr(name string) (netip.Addr, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var full string
	for i := range p.allow.Rules() {
		r := &p.allow.Rules()[i]
		if !r.Wild || !strings.HasSuffix(name, "."+r.Name) {
			continue
		}
		pl := p.pools[r.Name]
		if pl == nil {
			full = fmt.Sprintf("%s has no addresses (the run keeps at most %d transparent listeners): NXDOMAIN", r.Pattern, MaxForwards)
			continue
		}
		free := -1
		for j, n := range pl.names {
			if n == name {
				return pl.addrs[j], ""
			}
			if n == "" && free < 0 {
				free = j
			}
		}
		if free >= 0 {
			pl.names[free] = name
			return pl.addrs[free], ""
		}
		full = fmt.Sprintf("%s: its %d addresses went to other names: NXDOMAIN", r.Pattern, WildcardAddrs)
	}
	return netip.Addr{}, full
}

// wildName is the name a wildcard address went to, or "".
func (p *Proxy) wildName(a netip.Addr) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range p.pools {
		for j, x := range pl.addrs {
			if x == a {
				return pl.names[j]
			}
		}
	}
	return ""
}

// Unforwarded lists the allowlisted names that got no reserved address
// because the run's listeners would have passed MaxForwards.
func (p *Proxy) Unforwarded() []string { return slices.Clone(p.unforwarded) }

// Forwards lists the listeners the sandbox's init opens for ServeForward,
// in allowlist order.
func (p *Proxy) Forwards() []Forward { return slices.Clone(p.forwards) }

// NoProxy is the NO_PROXY value for the sandbox: its own loopback, minus
// the loopback addresses the allowlist names explicitly, which must go
// through the proxy to reach the host's (NO_PROXY has no ports, so such an
// address is dropped whole: the sandbox's own services stay reachable as
// "localhost").
func (p *Proxy) NoProxy() string {
	out := []string{"localhost"}
	for _, s := range []string{"127.0.0.1", "::1"} {
		ip := netip.MustParseAddr(s)
		listed := false
		for _, r := range p.allow.Rules() {
			if r.Addr == ip {
				listed = true
			}
		}
		if !listed {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// ServeDNS answers queries on pc until it is closed, by Close or the
// caller.
//
// Past the rate limit it does not read: it sleeps until a token is due and
// lets the socket's small receive buffer (dnsRcvBuf) fill, so that the
// kernel drops the flood in the sender's own syscalls, which the run's CPU
// quota pays for; the kernel's drop count (SO_MEMINFO) is taken after each
// sleep and at Close. Reading and discarding each datagram instead cost
// the supervisor 40% of a core under one flooding thread.
func (p *Proxy) ServeDNS(pc net.PacketConn) error {
	drops := dropCounter(pc)
	if !p.addCloser(pc) {
		return ErrClosed
	}
	p.mu.Lock()
	p.dnsFinal = append(p.dnsFinal, func() { p.dnsDrops(drops()) })
	p.mu.Unlock()
	defer p.dropCloser(pc)
	buf := make([]byte, maxDNSMessage+1)
	out := make([]byte, 0, maxDNSMessage)
	for {
		slept, live := p.waitToken(p.dnsUntilToken)
		if !live {
			return nil
		}
		if slept {
			p.dnsDrops(drops())
		}
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			if temporary(err) {
				continue
			}
			return err
		}
		if !p.dnsToken() {
			continue
		}
		if n > maxDNSMessage {
			p.dnsBad()
			continue
		}
		if reply := p.answer(buf[:n], out[:0]); reply != nil {
			pc.WriteTo(reply, from)
		}
	}
}

// dnsUntilToken is how long until the query bucket holds a token.
// waitToken sleeps, in steps of at most shedInterval, until untilToken
// says a token is there: meanwhile nothing is read, and the kernel drops
// what the socket's small buffer cannot hold. slept says it had to wait;
// live is false once the proxy is closing.
func (p *Proxy) waitToken(untilToken func() time.Duration) (slept, live bool) {
	for {
		wait := untilToken()
		if wait <= 0 {
			return slept, true
		}
		slept = true
		select {
		case <-time.After(min(wait, shedInterval)):
		case <-p.ctx.Done():
			return slept, false
		}
	}
}

func (p *Proxy) dnsUntilToken() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dnsBucket.untilToken()
}

// dnsDrops takes the kernel's running count of datagrams the stub's socket
// dropped (-1: not known) into the summary, as queries rate-limited.
func (p *Proxy) dnsDrops(total int64) {
	if total < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := int(total - p.dnsKernelDrops); d > 0 {
		p.dnsKernelDrops = total
		p.dnsStats.Queries += d
		p.dnsStats.RateLimited += d
	}
}

// ServeDNSTCP answers DNS over TCP (RFC 7766) on l until it is closed.
func (p *Proxy) ServeDNSTCP(l net.Listener) error {
	if !p.addCloser(l) {
		return ErrClosed
	}
	defer p.dropCloser(l)
	streams := make(chan struct{}, MaxDNSStreams)
	for {
		// Each connection takes a token of the queries' bucket, and none
		// is accepted while it is empty: the backlog fills and the kernel
		// turns the rest away, so a connect flood costs the supervisor no
		// more than the rate.
		for {
			wait := p.dnsUntilToken()
			if wait <= 0 {
				break
			}
			select {
			case <-time.After(min(wait, shedInterval)):
			case <-p.ctx.Done():
				return nil
			}
		}
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			if temporary(err) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		if !p.dnsConnToken() {
			c.Close()
			continue
		}
		select {
		case streams <- struct{}{}:
		default:
			p.mu.Lock()
			p.dnsStats.RateLimited++
			p.mu.Unlock()
			c.Close()
			continue
		}
		if !p.addCloser(c) {
			c.Close()
			return nil
		}
		go func() {
			defer func() { <-streams }()
			defer p.dropCloser(c)
			defer c.Close()
			p.serveDNSStream(c)
		}()
	}
}

// serveDNSStream answers length-prefixed queries on c until EOF, an
// oversized length or dnsStreamTimeout.
func (p *Proxy) serveDNSStream(c net.Conn) {
	c.SetDeadline(time.Now().Add(dnsStreamTimeout))
	buf := make([]byte, maxDNSMessage)
	out := make([]byte, 2, 2+maxDNSMessage)
	var l [2]byte
	for {
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if !p.dnsToken() {
			return
		}
		if n > maxDNSMessage {
			p.dnsBad()
			return
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		reply := p.answer(buf[:n], out[:2])
		if reply == nil {
			return
		}
		binary.BigEndian.PutUint16(reply, uint16(len(reply)-2))
		if _, err := c.Write(reply); err != nil {
			return
		}
	}
}

// dnsToken counts a query and takes a token for it, or counts it as rate
// limited.
func (p *Proxy) dnsToken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dnsStats.Queries++
	if !p.dnsBucket.take() {
		p.dnsStats.RateLimited++
		return false
	}
	return true
}

// dnsConnToken takes a token for a DNS-over-TCP connection, or counts it
// as rate limited.
func (p *Proxy) dnsConnToken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dnsBucket.take() {
		p.dnsStats.RateLimited++
		return false
	}
	return true
}

func (p *Proxy) dnsBad() {
	p.mu.Lock()
	p.dnsStats.Malformed++
	p.mu.Unlock()
}

// answer parses one query and appends the reply to out, or returns nil
// when there is nothing to answer (no parsable header).
func (p *Proxy) answer(q, out []byte) []byte {
	var ps dnsmessage.Parser
	h, err := ps.Start(q)
	if err != nil || h.Response {
		p.dnsBad()
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, Authoritative: true}
	questions, err := ps.AllQuestions()
	if err != nil || len(questions) != 1 || h.OpCode != 0 {
		p.dnsBad()
		rh.RCode = dnsmessage.RCodeFormatError
		if err == nil && h.OpCode != 0 {
			rh.RCode = dnsmessage.RCodeNotImplemented
		}
		return build(out, rh, nil, nil)
	}
	qq := questions[0]
	name, nerr := normalizeName(qq.Name.String())
	var addr netip.Addr
	why := "not on the allowlist: NXDOMAIN"
	if nerr == nil && qq.Class == dnsmessage.ClassINET {
		if v := p.reserved[name]; v != nil {
			addr = v.addr
		} else if a, full := p.wildAddr(name); a.IsValid() {
			addr = a
		} else if full != "" {
			why = full
		}
	}
	if !addr.IsValid() {
		rh.RCode = dnsmessage.RCodeNameError
		if nerr != nil {
			name = strings.TrimSuffix(qq.Name.String(), ".")
		}
		p.dnsRefuse(name, why)
		return build(out, rh, &qq, nil)
	}
	var a *dnsmessage.AResource
	if qq.Type == dnsmessage.TypeA || qq.Type == dnsmessage.TypeALL {
		a = &dnsmessage.AResource{A: addr.As4()}
	}
	// AAAA and every other type: NOERROR with no answer ("NODATA",
	// RFC 2308 §2.2), so that a resolver takes the A record and stops.
	return build(out, rh, &qq, a)
}

// build appends the reply to out; an error (which only a bug could cause)
// yields nil.
func build(out []byte, h dnsmessage.Header, q *dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(out, h)
	b.EnableCompression()
	if q != nil {
		if b.StartQuestions() != nil || b.Question(*q) != nil {
			return nil
		}
		if a != nil {
			if b.StartAnswers() != nil {
				return nil
			}
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if b.AResource(rh, *a) != nil {
				return nil
			}
		}
	}
	m, err := b.Finish()
	if err != nil {
		return nil
	}
	return m
}

// dnsRefuse counts a refused lookup and records it, once per name: a
// resolver asks for A and AAAA and retries, and one record per name is
// what the reader of the Result needs. The set of names seen is bounded by
// the log's own caps: once the log takes no more, no name is added.
func (p *Proxy) dnsRefuse(name, why string) {
	name = clip(name, maxRecordHost)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dnsStats.Refused++
	if _, seen := p.dnsSeen[name]; seen {
		return
	}
	p.accepted++
	p.refused++
	slot := p.record()
	if slot == nil {
		return
	}
	p.fileRecord(slot, Attempt{Kind: KindDNS, Host: name, Method: "DNS", Reason: why})
	if slot.done {
		p.dnsSeen[name] = struct{}{}
	}
}

// addCloser registers c for Close, or reports false after Close.
func (p *Proxy) addCloser(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.closers[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) dropCloser(c io.Closer) {
	p.mu.Lock()
	delete(p.closers, c)
	p.mu.Unlock()
	p.wg.Done()
}
