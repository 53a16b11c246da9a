package netproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Defaults for the zero values of Config. Timeouts and the connection cap
// cannot be switched off: this is a security boundary.
const (
	DefaultMaxConns      = 32
	DefaultIdleTimeout   = 60 * time.Second
	DefaultHeaderTimeout = 10 * time.Second

	// MaxHeaderBytes caps a request's request line and header fields
	// (and a SOCKS5 greeting); more gets 431. 32 KiB is four times the
	// request-line limit of common servers (8 KiB: nginx, Apache), and it
	// bounds what one request makes the supervisor read and hold before
	// any decision, times MaxConns (it was 64 KiB; issue 11, finding 1).
	MaxHeaderBytes = 32 << 10
	// maxResponseHeaderBytes caps a destination's response header.
	maxResponseHeaderBytes = 256 << 10
	// MaxAttempts caps the attempt log; later attempts are counted in
	// AttemptsDropped but not kept, so a payload cannot exhaust memory.
	MaxAttempts = 10000
	// MaxAttemptBytes caps the attempt log's size, counted as the JSON
	// encoding of each record (which is how it ends up in the Result and
	// the audit line): a count cap alone let 10,000 records of 64 KiB each
	// grow the supervisor by gigabytes (issue 11, finding 1). Records that
	// would pass it are counted in AttemptsDropped.
	MaxAttemptBytes = 256 << 10

	// Refusals (every attempt that does not reach a destination: refused,
	// malformed, cut short, or failing to dial) draw on a token bucket: DefaultRefusalBurst at once, then
	// DefaultRefusalRate a second. Past it, new connections are closed at
	// accept time without reading a byte, so that a payload flooding the
	// proxy with requests it will refuse spends the host's CPU, which no
	// quota of the run covers, at a fixed rate (issue 11, finding 9).
	DefaultRefusalBurst = 64
	DefaultRefusalRate  = 10.0
	// shedInterval is how often, while refusals are over their budget, the
	// accept loop closes what waits in the listen backlog (shed). A wakeup
	// per connection cost the supervisor about 200 µs each on a VM, most
	// of it context switches, which is how 4 payload threads still took
	// 15% of a core with the rate limit alone.
	shedInterval = 50 * time.Millisecond

	resolveTimeout = 10 * time.Second
	dialTimeout    = 10 * time.Second // per address tried
	lingerTimeout  = 500 * time.Millisecond
	sayTimeout     = 5 * time.Second // for a short reply to the client
)

// Config configures a Proxy. See the package documentation.
type Config struct {
	// Allow lists the destinations (see ParseAllow). Empty allows nothing.
	Allow []string
	// Resolve pins names to addresses, like curl --resolve: "NAME:PORT" or
	// "NAME" (any port) -> "ADDR[:PORT][,ADDR[:PORT]...]". A pin with a port
	// rewrites the destination port too. Pins only resolve: the name must
	// still pass Allow.
	Resolve map[string]string
	// MaxConns caps concurrent client connections (0: DefaultMaxConns).
	MaxConns int
	// MaxBytesUp and MaxBytesDown cap the bytes sent to and received from
	// destinations over the whole run, across all connections (0: unlimited).
	MaxBytesUp, MaxBytesDown int64
	// IdleTimeout cuts a connection that moved no byte in either direction
	// for that long (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// HeaderTimeout bounds the time from accept to the end of the request
	// header (0: DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// RefusalBurst and RefusalRate (per second) size the token bucket that
	// refusals draw on (0: DefaultRefusalBurst, DefaultRefusalRate). They
	// cannot be switched off.
	RefusalBurst int
	RefusalRate  float64
	// Resolver resolves allowed names that have no pin. It gets the
	// normalised name (lower case, no trailing dot) and must honour ctx.
	// Default: the host's resolver, asked for the rooted name ("name.") so
	// that no resolv.conf search domain applies.
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address the proxy checked, always "tcp" and a
	// numeric "IP:PORT" (default: net.Dialer). It must honour ctx.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// What one record may hold, so that the log's size follows from its count
// and no field can carry a payload's megabytes into the Result (issue 11,
// finding 1). Longer values are cut and end in "...".
const (
	maxRecordMethod = 16  // the longest known method is 7 bytes
	maxRecordHost   = 255 // a name is at most 253 bytes, an IPv6 literal 45
	maxRecordText   = 512 // Reason and Error (oneLine cuts them at 300 already)
	maxRecordAddr   = 64  // "[IPv6]:port"
)

// bounded returns a with every string field cut to its bound.
func bounded(a Attempt) Attempt {
	a.Method = clip(a.Method, maxRecordMethod)
	a.Host = clip(a.Host, maxRecordHost)
	a.Reason = clip(a.Reason, maxRecordText)
	a.Error = clip(a.Error, maxRecordText)
	a.Addr = clip(a.Addr, maxRecordAddr)
	return a
}

// recordSize is what a record adds to the log: its JSON encoding, which is
// what the Result and the audit line will hold.
func recordSize(a Attempt) int {
	b, err := json.Marshal(a)
	if err != nil { // cannot happen for this struct; count it as large
		return maxRecordMethod + maxRecordHost + 2*maxRecordText + maxRecordAddr + 256
	}
	return len(b)
}

// clipMarker ends a value that clip cut.
const clipMarker = "..."

// clip cuts s to at most n bytes, on a UTF-8 boundary, ending it in
// clipMarker when it was cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len(clipMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + clipMarker
}

// ErrClosed is returned by Serve on a Proxy that was closed.
var ErrClosed = errors.New("netproxy: proxy closed")

// Proxy is an allowlisting HTTP forward proxy, CONNECT and SOCKS5 server.
type Proxy struct {
	allow        *Allowlist
	pins         map[pinKey][]netip.AddrPort // port 0 in a value: the requested port
	maxConns     int
	idle, header time.Duration
	resolve      func(ctx context.Context, host string) ([]netip.Addr, error)
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
	up, down     *budget
	ctx          context.Context // cancelled by Close: stops resolves and dials
	cancel       context.CancelFunc
	wg           sync.WaitGroup // Serve loops and sessions
	mu           sync.Mutex
	closed       bool
	listeners    map[net.Listener]struct{}
	conns        map[net.Conn]struct{} // client and upstream, open
	active       int                   // sessions running
	attempts     []*attemptSlot        // in accept order; Take removes those that ended
	maxAttempts  int                   // MaxAttempts; lowered by tests
	maxLogBytes  int                   // MaxAttemptBytes; lowered by tests
	logBytes     int                   // recordSize of the records kept
	logFull      bool
	dropped      int
	accepted     int
	refused      int
	rateLimited  int
	refusals     bucket
	// taken is the Summary's counters at the last Take, which counts
	// from there.
	taken Summary
	// The DNS stub and the transparent listeners (dns.go).
	reserved map[string]*reservation
	pools    map[string]*pool // by wildcard suffix
	forwards []Forward
	// unforwarded: listed names past MaxForwards, with no reservation.
	unforwarded []string
	dnsBucket   bucket
	dnsStats    DNSSummary
	dnsSeen     map[string]struct{}
	// dnsKernelDrops is the last kernel drop count taken into dnsStats;
	// dnsFinal take the last one at Close, before the sockets go.
	dnsKernelDrops int64
	dnsFinal       []func()
	closers        map[io.Closer]struct{} // DNS sockets and streams, open
}

type attemptSlot struct {
	a    Attempt
	done bool
	// dropped: the record did not fit the log's bytes (fileRecord); Take
	// forgets the slot.
	dropped bool
}

// bucket is a token bucket (p.mu held): up to burst tokens, refilled at
// rate a second.
type bucket struct {
	burst, rate float64
	tokens      float64
	last        time.Time
}

func newBucket(burst int, rate float64) bucket {
	return bucket{burst: float64(burst), rate: rate, tokens: float64(burst), last: time.Now()}
}

func (b *bucket) refill() {
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// take takes a token, or reports false when there is none.
func (b *bucket) take() bool {
	b.refill()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// untilToken is how long until take would succeed.
func (b *bucket) untilToken() time.Duration {
	b.refill()
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// give returns a token that turned out not to be needed.
func (b *bucket) give() {
	b.refill()
	b.tokens = min(b.burst, b.tokens+1)
}

type pinKey struct {
	name string
	port int // 0: any port
}

// New checks c and returns a Proxy that is ready to Serve.
func New(c Config) (*Proxy, error) {
	allow, err := ParseAllow(c.Allow)
	if err != nil {
		return nil, err
	}
	pins, err := parsePins(c.Resolve)
	if err != nil {
		return nil, err
	}
	switch {
	case c.MaxConns < 0:
		return nil, fmt.Errorf("netproxy: MaxConns %d is negative", c.MaxConns)
	case c.MaxBytesUp < 0 || c.MaxBytesDown < 0:
		return nil, fmt.Errorf("netproxy: byte caps up %d, down %d: negative", c.MaxBytesUp, c.MaxBytesDown)
	case c.IdleTimeout < 0 || c.HeaderTimeout < 0:
		return nil, fmt.Errorf("netproxy: timeouts idle %v, header %v: negative", c.IdleTimeout, c.HeaderTimeout)
	case c.RefusalBurst < 0 || c.RefusalRate < 0 || math.IsNaN(c.RefusalRate) || math.IsInf(c.RefusalRate, 0):
		return nil, fmt.Errorf("netproxy: refusal burst %d, rate %v: negative or not finite", c.RefusalBurst, c.RefusalRate)
	}
	p := &Proxy{
		allow:       allow,
		pins:        pins,
		maxConns:    c.MaxConns,
		idle:        c.IdleTimeout,
		header:      c.HeaderTimeout,
		resolve:     c.Resolver,
		dial:        c.Dial,
		up:          newBudget("upload", c.MaxBytesUp),
		down:        newBudget("download", c.MaxBytesDown),
		listeners:   map[net.Listener]struct{}{},
		conns:       map[net.Conn]struct{}{},
		maxAttempts: MaxAttempts,
		maxLogBytes: MaxAttemptBytes,
	}
	if p.maxConns == 0 {
		p.maxConns = DefaultMaxConns
	}
	if c.RefusalBurst == 0 {
		c.RefusalBurst = DefaultRefusalBurst
	}
	if c.RefusalRate == 0 {
		c.RefusalRate = DefaultRefusalRate
	}
	p.refusals = newBucket(c.RefusalBurst, c.RefusalRate)
	p.reserved, p.pools, p.forwards, p.unforwarded = reserve(allow, pins)
	p.dnsBucket = newBucket(DefaultDNSBurst, DefaultDNSRate)
	p.dnsSeen = map[string]struct{}{}
	p.closers = map[io.Closer]struct{}{}
	if p.idle == 0 {
		p.idle = DefaultIdleTimeout
	}
	if p.header == 0 {
		p.header = DefaultHeaderTimeout
	}
	if p.resolve == nil {
		p.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			// Rooted, so the host's resolv.conf search list cannot turn an
			// allowed single-label name into some other name.
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host+".")
		}
	}
	if p.dial == nil {
		d := &net.Dialer{}
		p.dial = d.DialContext
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// parsePins parses Config.Resolve. Keys are sorted first so that the error
// for a bad map is always the same one.
func parsePins(m map[string]string) (map[pinKey][]netip.AddrPort, error) {
	pins := map[pinKey][]netip.AddrPort{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		bad := func(why string, args ...any) error {
			return fmt.Errorf("resolve pin %q -> %q: %s", k, m[k], fmt.Sprintf(why, args...))
		}
		h, portStr, bracketed, err := splitHostPort(strings.TrimSpace(k), false)
		if err != nil {
			return nil, bad("%v", err)
		}
		name, ip, err := parseHost(h, bracketed)
		if err != nil {
			return nil, bad("%v", err)
		}
		if ip.IsValid() {
			return nil, bad("the key must be a name, not an address")
		}
		key := pinKey{name: name}
		if portStr != "" {
			if key.port, err = parsePort(portStr); err != nil {
				return nil, bad("%v", err)
			}
		}
		if _, dup := pins[key]; dup {
			return nil, bad("%s is pinned twice", k)
		}
		for _, v := range strings.Split(m[k], ",") {
			ap, err := parsePinAddr(strings.TrimSpace(v))
			if err != nil {
				return nil, bad("%v", err)
			}
			pins[key] = append(pins[key], ap)
		}
	}
	return pins, nil
}

func parsePinAddr(v string) (netip.AddrPort, error) {
	h, portStr, bracketed, err := splitHostPort(v, true)
	if err != nil {
		return netip.AddrPort{}, err
	}
	_, ip, err := parseHost(h, bracketed)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if !ip.IsValid() {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address", h)
	}
	port := 0
	if portStr != "" {
		if port, err = parsePort(portStr); err != nil {
			return netip.AddrPort{}, err
		}
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// Serve accepts connections on l until l is closed, by Close or by the
// caller, and then returns nil; it returns another accept error as is. Each
// connection is handled on its own goroutine, which Close waits for.
func (p *Proxy) Serve(l net.Listener) error { return p.serve(l, nil) }

// serve is Serve, for the proxy's listener (fw nil) or a transparent one.
func (p *Proxy) serve(l net.Listener, fw *Forward) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		p.wg.Done()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporary(err) {
				return err
			}
			// Out of fds or buffers: wait for some to come back, as
			// net/http does, rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
				continue
			case <-p.ctx.Done():
				return nil
			}
		}
		backoff = 0
		if !p.admit(c, fw) && !p.shed(l) {
			return nil
		}
	}
}

func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// admit starts a session for c, or refuses it over the connection cap or
// the refusal rate limit, and reports false for the latter. Refusals are
// written from the accept loop without a goroutine, so a flood of
// connections costs no more than the accept itself.
//
// Every session takes a refusal token up front and gives it back once a
// destination is dialled (session.open): the bucket then bounds the
// sessions that end refused or failed, including those in flight, while
// allowed connections, however many or long, cost none.
func (p *Proxy) admit(c net.Conn, fw *Forward) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return true
	}
	p.accepted++
	if !p.refusals.take() {
		// Not a byte read, nothing recorded but the count: this is the
		// path a flood takes, so it must stay this cheap.
		p.rateLimited++
		p.mu.Unlock()
		if fw == nil { // a transparent client speaks its own protocol
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(rateLimitedResponse)
		}
		c.Close()
		return false
	}
	if p.active >= p.maxConns {
		reason := fmt.Sprintf("connection cap reached: %d connections already open", p.maxConns)
		p.refused++
		a := Attempt{Reason: reason}
		if fw != nil {
			a = Attempt{Kind: KindForward, Host: fw.Name, Port: int(fw.Port), Method: "TCP", Reason: reason}
		}
		p.fileRecord(p.record(), a)
		p.mu.Unlock()
		if fw == nil {
			// A fresh socket's send buffer is empty, so this write cannot
			// block; the deadline is belt and braces.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(errorResponse(429, reason))
		}
		c.Close()
		return true
	}
	p.active++
	p.conns[c] = struct{}{}
	s := newSession(p, c)
	s.fw = fw
	s.slot = p.record()
	p.wg.Add(1)
	p.mu.Unlock()
	go s.run()
	return true
}

// shed runs while refusals are over their budget: every shedInterval it
// closes, unread and without a goroutine or a wakeup each, whatever waits
// in l's backlog, until the bucket holds a token again and the next
// connection may be served. It reports false once the proxy is closed.
func (p *Proxy) shed(l net.Listener) bool {
	for {
		wait := p.untilToken()
		if wait <= 0 {
			return true
		}
		select {
		case <-time.After(min(wait, shedInterval)):
		case <-p.ctx.Done():
			return false
		}
		if p.untilToken() <= 0 {
			return true // the first one waiting gets the token
		}
		if n := drainBacklog(l); n > 0 {
			p.mu.Lock()
			p.accepted += n
			p.rateLimited += n
			p.mu.Unlock()
		}
	}
}

// untilToken is how long until the refusal bucket holds a token.
func (p *Proxy) untilToken() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals.untilToken()
}

// rateLimitedResponse is the answer to a connection over the refusal rate
// limit, built once: that path must not format anything.
var rateLimitedResponse = errorResponse(429, "too many refused requests: this connection was closed unread")

// record reserves a slot (done false) that keeps a session's place in
// accept order and returns it, or nil once the log is full. p.mu held.
func (p *Proxy) record() *attemptSlot {
	if len(p.attempts) >= p.maxAttempts || p.logFull {
		p.dropped++
		return nil
	}
	slot := &attemptSlot{}
	p.attempts = append(p.attempts, slot)
	return slot
}

// fileRecord puts a, bounded, into its slot, or drops it when it would
// take the log past its byte cap; from then on the log takes no more, so
// that a smaller record cannot slip in after a dropped one. p.mu held.
func (p *Proxy) fileRecord(slot *attemptSlot, a Attempt) {
	if slot == nil {
		return
	}
	a = bounded(a)
	n := recordSize(a)
	if p.logFull || p.logBytes+n > p.maxLogBytes {
		p.logFull = true
		p.dropped++
		*slot = attemptSlot{dropped: true}
		return
	}
	p.logBytes += n
	*slot = attemptSlot{a: a, done: true}
}

// refund gives a session's refusal token back: it reached a destination.
func (p *Proxy) refund() {
	p.mu.Lock()
	p.refusals.give()
	p.mu.Unlock()
}

// track registers an upstream connection so that Close closes it too.
func (p *Proxy) track(c net.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return ErrClosed
	}
	p.conns[c] = struct{}{}
	return nil
}

// finish ends a session whose connections are closed.
func (p *Proxy) finish(s *session, a Attempt) {
	p.mu.Lock()
	delete(p.conns, s.client)
	if s.upc != nil {
		delete(p.conns, s.upc)
	}
	if !s.refunded {
		p.refused++
	}
	p.fileRecord(s.slot, a)
	p.active--
	p.mu.Unlock()
	p.wg.Done()
}

// Close stops every Serve loop, closes every client and upstream
// connection, cancels resolves and dials in flight and waits for all of the
// proxy's goroutines to return: when Close returns the proxy holds no
// goroutine and no socket. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	final := p.dnsFinal
	p.dnsFinal = nil
	p.mu.Unlock()
	for _, f := range final {
		f()
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		for l := range p.listeners {
			l.Close()
		}
		for c := range p.conns {
			c.Close()
		}
		for c := range p.closers {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Attempts returns every attempt whose connection has ended, allowed or not,
// in the order the connections were accepted. After Close, that is all of
// them (up to MaxAttempts).
func (p *Proxy) Attempts() []Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Attempt, 0, len(p.attempts))
	for _, s := range p.attempts {
		if s.done {
			out = append(out, s.a)
		}
	}
	return out
}

// AttemptsDropped returns how many attempts were served but not kept
// because the log already held MaxAttempts records or MaxAttemptBytes.
func (p *Proxy) AttemptsDropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Summary counts the attempts so far, listed or not; after Close it
// covers the whole run.
func (p *Proxy) Summary() Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Summary{Attempts: p.accepted, Dropped: p.dropped, Refused: p.refused, RateLimited: p.rateLimited, DNS: p.dnsStats}
	for _, a := range p.attempts {
		if a.done {
			s.Recorded++
		}
	}
	return s
}

// Open is how many connections the proxy is serving now: their attempts
// are recorded when they end.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// Take returns the attempts that ended since the last Take (or since the
// proxy started), in accept order, the Summary of that span and how many
// connections are still open (their records come with a later Take), and
// forgets the attempts returned: a session's proxy serves many cells, and each cell's
// Execution lists its own. The log's caps (MaxAttempts, MaxAttemptBytes)
// then hold per span, so that a session that lives for hours neither runs
// out of log nor grows it; connections still open stay in the log, in
// their place, for a later Take. The byte budgets and the connection cap
// are not reset: they hold for the proxy's life.
func (p *Proxy) Take() (attempts []Attempt, sum Summary, open int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Attempt{}
	kept := p.attempts[:0]
	for _, s := range p.attempts {
		switch {
		case s.done:
			out = append(out, s.a)
			p.logBytes -= recordSize(s.a)
		case !s.dropped:
			kept = append(kept, s)
		}
	}
	clear(p.attempts[len(kept):]) // no slot outlives its span in the array
	p.attempts = kept
	// A new span: a record dropped in the last one no longer keeps a
	// smaller one out (fileRecord), and a refused name is recorded again
	// the first time this span asks for it (dnsRefuse).
	p.logFull = false
	clear(p.dnsSeen)
	now := Summary{Attempts: p.accepted, Dropped: p.dropped, Refused: p.refused, RateLimited: p.rateLimited, DNS: p.dnsStats}
	was := p.taken
	p.taken = now
	return out, Summary{
		Attempts: now.Attempts - was.Attempts, Recorded: len(out), Dropped: now.Dropped - was.Dropped,
		Refused: now.Refused - was.Refused, RateLimited: now.RateLimited - was.RateLimited,
		DNS: DNSSummary{
			Queries: now.DNS.Queries - was.DNS.Queries, Refused: now.DNS.Refused - was.DNS.Refused,
			Malformed: now.DNS.Malformed - was.DNS.Malformed, RateLimited: now.DNS.RateLimited - was.DNS.RateLimited,
		},
	}, p.active
}

// refusal is a decision against a destination: an HTTP status and a one-line
// reason. A nil *refusal means go ahead.
type refusal struct {
	status  int // 403, 429, 502
	reason  string
	allowed bool  // the checks passed; resolving or dialling failed
	err     error // the resolve or dial error, for SOCKS reply codes
}

// decide applies the allowlist and the address checks to host:port (ip is
// valid for an IP literal, host is then its string form) and returns the
// addresses to dial. Every address returned has been checked; the caller
// dials those and nothing else, so DNS is consulted once per attempt and a
// rebinding answer cannot slip in between check and dial.
func (p *Proxy) decide(ctx context.Context, host string, ip netip.Addr, port int) ([]netip.AddrPort, *refusal) {
	hp := joinHostPort(host, port)
	deny := func(format string, args ...any) *refusal {
		return &refusal{status: 403, reason: fmt.Sprintf(format, args...)}
	}
	if ip.IsValid() {
		if p.allow.MatchAddr(ip, port) != nil {
			return []netip.AddrPort{netip.AddrPortFrom(ip, uint16(port))}, nil
		}
		if why := classify(ip); why != "" {
			return nil, deny("%s is %s and not on the allowlist", hp, why)
		}
		return nil, deny("%s is not on the allowlist", hp)
	}
	r := p.allow.MatchName(host, port)
	if r == nil {
		return nil, deny("%s is not on the allowlist", hp)
	}
	pinned := p.pins[pinKey{host, port}]
	if pinned == nil {
		pinned = p.pins[pinKey{host, 0}]
	}
	if pinned != nil {
		out := make([]netip.AddrPort, 0, len(pinned))
		for _, a := range pinned {
			if a.Port() == 0 {
				a = netip.AddrPortFrom(a.Addr(), uint16(port))
			}
			// A pin is the user's own statement about where a name lives,
			// so it may point at a special address, but only for a name
			// listed exactly: a wildcard is too wide to vouch for it.
			if why := classify(a.Addr()); why != "" && r.Wild && p.allow.MatchAddr(a.Addr(), int(a.Port())) == nil {
				return nil, deny("%s is pinned to %s, %s; only an exact allowlist entry (not %s) may reach it", hp, a.Addr(), why, r.Pattern)
			}
			out = append(out, a)
		}
		return out, nil
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	addrs, err := p.resolve(rctx, host)
	cancel()
	if err != nil {
		return nil, &refusal{status: 502, reason: oneLine(fmt.Sprintf("resolve %s: %v", host, err)), allowed: true, err: err}
	}
	if len(addrs) == 0 {
		return nil, &refusal{status: 502, reason: fmt.Sprintf("resolve %s: no addresses", host), allowed: true}
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		// One special answer refuses the whole name: a name that mixes
		// public and internal addresses is a rebinding setup, not a
		// service to pick the good half of.
		if why := classify(a); why != "" && p.allow.MatchAddr(a, port) == nil {
			return nil, deny("%s resolves to %s, %s, which the allowlist does not name", host, a, why)
		}
		ap := netip.AddrPortFrom(a, uint16(port))
		if !slices.Contains(out, ap) {
			out = append(out, ap)
		}
	}
	return out, nil
}

// dialAny dials the checked addresses in order and returns the first
// connection, tracked for Close.
func (p *Proxy) dialAny(ctx context.Context, addrs []netip.AddrPort) (net.Conn, netip.AddrPort, error) {
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := p.dial(dctx, "tcp", a.String())
		cancel()
		if err == nil {
			if err := p.track(c); err != nil {
				return nil, a, err
			}
			return c, a, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, last
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, fmt.Sprint(port))
}

// oneLine keeps a reason or error on one line and short enough to log.
func oneLine(s string) string {
	return clip(strings.Join(strings.Fields(s), " "), 300)
}
