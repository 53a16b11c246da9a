package netproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// session is one client connection: one HTTP request, one CONNECT tunnel or
// one SOCKS5 CONNECT. Keep-alive is off on purpose: one connection is one
// decision and one record, and no later request can ride on a connection
// (or an upstream socket) that an earlier request opened.
type session struct {
	p      *Proxy
	clk    clock
	client net.Conn
	cm     *meter   // client side
	upc    net.Conn // upstream, nil until dialled
	um     *meter   // upstream side
	nUp    atomic.Int64
	nDown  atomic.Int64
	slot   *attemptSlot // nil: the log was full
	rec    Attempt
	fw     *Forward // a transparent connection to fw's name and port
	// refunded: a destination was dialled and the session's refusal
	// token went back (Proxy.admit).
	refunded bool

	mu   sync.Mutex
	err  error // the first error that ended the session
	done bool  // the exchange is complete; later errors are teardown noise
}

func newSession(p *Proxy, c net.Conn) *session {
	s := &session{p: p, client: c}
	s.clk.start = time.Now()
	s.clk.idle = p.idle
	s.clk.hard.Store(int64(p.header))
	s.cm = &meter{Conn: c, side: "client", clk: &s.clk}
	return s
}

func (s *session) run() {
	defer s.end()
	if s.fw != nil {
		s.forwardTCP()
		return
	}
	hl := &headerLimit{r: s.cm, n: MaxHeaderBytes}
	br := bufio.NewReaderSize(hl, 4096)
	first, err := br.Peek(1)
	if err != nil {
		s.clk.endHeader()
		switch {
		case errors.Is(err, errHeaderTimeout):
			s.refuse(408, fmt.Sprintf("no request within the header timeout of %v", s.p.header))
		case errors.Is(err, io.EOF):
			s.fail(errors.New("closed before sending a request"))
		default:
			s.fail(err)
		}
		return
	}
	switch first[0] {
	case socks5Version:
		s.serveSOCKS(br, hl)
	case 4:
		// SOCKS4 and 4a are refused: SOCKS5 covers the same ground plus
		// IPv6, and one SOCKS dialect is enough surface. Answer "request
		// rejected" (91) in its own terms.
		s.rec.Method = "SOCKS4"
		s.rec.Reason = "SOCKS4 is not supported; use SOCKS5 or HTTP"
		s.say([]byte{0, 91, 0, 0, 0, 0, 0, 0})
	default:
		s.serveHTTP(br, hl)
	}
}

// end closes both connections and files the attempt.
func (s *session) end() {
	s.cut()
	a := s.rec
	a.BytesUp, a.BytesDown = s.nUp.Load(), s.nDown.Load()
	a.DurationMS = time.Since(s.clk.start).Milliseconds()
	s.mu.Lock()
	if a.Error == "" && s.err != nil {
		if errors.Is(s.err, net.ErrClosed) && s.p.isClosed() {
			a.Error = "proxy closed"
		} else {
			a.Error = oneLine(s.err.Error())
		}
	}
	s.mu.Unlock()
	s.p.finish(s, a)
}

// cut closes both sides at once, which also unblocks the other direction.
func (s *session) cut() {
	s.client.Close()
	if s.upc != nil {
		s.upc.Close()
	}
}

// fail keeps the first error that ended the session.
func (s *session) fail(err error) {
	s.mu.Lock()
	if s.err == nil && !s.done && err != nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *session) complete() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// refuse answers with an HTTP error and records why.
func (s *session) refuse(status int, reason string) {
	s.refuseHTTP(&refusal{status: status, reason: reason})
}

func (s *session) refuseHTTP(r *refusal) {
	reason := oneLine(r.reason)
	if r.allowed {
		s.rec.Allowed = true
		s.rec.Error = reason
	} else {
		s.rec.Reason = reason
	}
	if err := s.say(errorResponse(r.status, reason)); err == nil {
		s.linger()
	}
}

// say writes a short protocol message (an error response, a SOCKS reply) to
// the client under its own deadline, outside the idle clock: the message
// that reports an idle timeout must not fail for the same reason.
func (s *session) say(b []byte) error {
	s.client.SetWriteDeadline(time.Now().Add(sayTimeout))
	_, err := s.client.Write(b)
	return err
}

// errorResponse is a complete HTTP/1.1 response with the reason as its body.
func errorResponse(status int, reason string) []byte {
	body := "sbx proxy: " + reason + "\n"
	return []byte(fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body))
}

// linger half-closes the client and drains what it still sends for a moment
// before the close: closing a socket with unread input sends a reset, which
// can destroy the error response before the client reads it (net/http does
// the same).
func (s *session) linger() {
	if cw, ok := s.client.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	s.client.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, s.client, 256<<10)
}

// knownMethods are the request methods the proxy serves: those of RFC 9110
// §9.3 and PATCH (RFC 5789). Methods are case-sensitive (RFC 9110 §9.1).
var knownMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// maxMethodLen is the longest of knownMethods ("CONNECT", "OPTIONS").
const maxMethodLen = 7

// methodError is a request line whose method the proxy does not serve.
type methodError struct {
	token string // the method, or its first maxMethodLen+1 bytes
	long  bool   // token is only the start of a longer one
}

// record is the method as the attempt records it: bounded, and marked when
// only its start was read.
func (e *methodError) record() string {
	if e.long {
		return e.token + clipMarker
	}
	return e.token
}

func (e *methodError) Error() string {
	return fmt.Sprintf("method %q is not one the proxy serves (%s)", e.record(), strings.Join(knownMethods, ", "))
}

// errNotRequestLine is a connection that does not start with a method token.
var errNotRequestLine = errors.New("not an HTTP request line")

// readMethod peeks at the method that starts a request line, without
// consuming it (http.ReadRequest reads the line again), and looks at no
// more than maxMethodLen+1 bytes. A method may be any token up to the
// header cap as far as RFC 9110 §9.1 and net/http are concerned, so it is
// checked here, before anything else is read, parsed or recorded (issue
// 11, finding 1).
func readMethod(br *bufio.Reader) (string, error) {
	var b []byte
	for i := 1; i <= maxMethodLen+1; i++ {
		var err error
		if b, err = br.Peek(i); err != nil {
			return "", err
		}
		switch c := b[i-1]; {
		case c == ' ' && i > 1:
			m := string(b[:i-1])
			if !slices.Contains(knownMethods, m) {
				return "", &methodError{token: m}
			}
			return m, nil
		case !isTokenChar(c):
			return "", errNotRequestLine
		}
	}
	return "", &methodError{token: string(b), long: true}
}

// isTokenChar reports whether c is a tchar of RFC 9110 §5.6.2.
func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (s *session) serveHTTP(br *bufio.Reader, hl *headerLimit) {
	if _, err := readMethod(br); err != nil {
		s.clk.endHeader()
		var me *methodError
		switch {
		case errors.As(err, &me):
			// RFC 9110 §15.6.2: 501 is the answer to a method the server
			// does not recognise (405 is for one it knows but the
			// resource does not allow).
			s.rec.Method = me.record()
			s.refuse(501, me.Error())
		case errors.Is(err, errHeaderTimeout):
			s.refuse(408, fmt.Sprintf("request header not complete within the header timeout of %v", s.p.header))
		case errors.Is(err, errNotRequestLine):
			s.refuse(400, "malformed request: "+err.Error())
		case errors.Is(err, io.EOF):
			s.refuse(400, "malformed request: cut short in the method")
		default:
			s.fail(err)
		}
		return
	}
	req, err := http.ReadRequest(br)
	s.clk.endHeader()
	switch {
	case hl.hit:
		s.refuse(431, fmt.Sprintf("request header larger than %d bytes", MaxHeaderBytes))
		return
	case errors.Is(err, errHeaderTimeout):
		s.refuse(408, fmt.Sprintf("request header not complete within the header timeout of %v", s.p.header))
		return
	case err != nil:
		s.refuse(400, "malformed request: "+err.Error())
		return
	}
	hl.lift()
	s.rec.Method = req.Method
	host, ip, port, err := requestTarget(req)
	if err != nil {
		s.refuse(400, err.Error())
		return
	}
	s.rec.Host, s.rec.Port = host, port
	if req.Method == http.MethodConnect {
		s.connect(br, host, ip, port)
		return
	}
	s.forward(req, host, ip, port)
}

// requestTarget returns the destination of a proxy request: authority-form
// for CONNECT (RFC 9110 §9.3.6), absolute-form http:// otherwise (RFC 9112
// §3.2.2). The Host header is ignored, as RFC 9112 §3.2.2 requires of a
// proxy given an absolute-form target.
func requestTarget(req *http.Request) (host string, ip netip.Addr, port int, err error) {
	var authority string
	defPort := 80
	if req.Method == http.MethodConnect {
		authority = req.RequestURI
		if authority == "" || strings.ContainsAny(authority, "/?#@") {
			return "", ip, 0, fmt.Errorf("CONNECT target %q is not HOST:PORT", req.RequestURI)
		}
		defPort = 0
	} else {
		u := req.URL
		switch {
		case strings.Contains(req.RequestURI, "#"):
			// RFC 9112 §3.2: a request target carries no fragment.
			return "", ip, 0, fmt.Errorf("request target %q has a fragment", req.RequestURI)
		case !u.IsAbs():
			return "", ip, 0, fmt.Errorf("request target %q is not absolute-form (http://host/...): this is a proxy", req.RequestURI)
		case strings.EqualFold(u.Scheme, "https"):
			return "", ip, 0, fmt.Errorf("https:// requests must use CONNECT, not %s", req.Method)
		case !strings.EqualFold(u.Scheme, "http"):
			return "", ip, 0, fmt.Errorf("scheme %q is not supported (http, or CONNECT for anything else)", u.Scheme)
		case u.User != nil:
			return "", ip, 0, errors.New("request target has userinfo (RFC 9110 §4.2.4)")
		case u.Opaque != "":
			return "", ip, 0, fmt.Errorf("request target %q has no authority", req.RequestURI)
		}
		authority = u.Host
	}
	h, portStr, bracketed, err := splitHostPort(authority, false)
	if err != nil {
		return "", ip, 0, fmt.Errorf("target %q: %v", authority, err)
	}
	port = defPort
	if portStr != "" {
		if port, err = parsePort(portStr); err != nil {
			return "", ip, 0, fmt.Errorf("target %q: %v", authority, err)
		}
	}
	if port == 0 {
		return "", ip, 0, fmt.Errorf("CONNECT target %q has no port", authority)
	}
	name, ip, err := parseHost(h, bracketed)
	if err != nil {
		return "", ip, 0, fmt.Errorf("target %q: %v", authority, err)
	}
	if ip.IsValid() {
		name = ip.String()
	}
	return name, ip, port, nil
}

// open decides and dials. It returns a refusal for the caller to put in its
// own protocol's terms, or nil with s.upc and s.um ready.
func (s *session) open(host string, ip netip.Addr, port int) *refusal {
	addrs, r := s.p.decide(s.p.ctx, host, ip, port)
	if r != nil {
		return r
	}
	for _, b := range []*budget{s.p.up, s.p.down} {
		if b.exhausted() {
			ce := b.err.(*capError)
			return &refusal{status: 429, reason: fmt.Sprintf("the run's %s cap of %d bytes is used up", ce.Dir, ce.Limit)}
		}
	}
	s.rec.Allowed = true
	c, a, err := s.p.dialAny(s.p.ctx, addrs)
	if err != nil {
		return &refusal{status: 502, reason: oneLine(fmt.Sprintf("dial %s: %v", joinHostPort(host, port), err)), allowed: true, err: err}
	}
	s.upc = c
	s.p.refund()
	s.refunded = true
	s.rec.Addr = a.String()
	s.um = &meter{Conn: c, side: "destination", clk: &s.clk, rd: s.p.down, wr: s.p.up, nr: &s.nDown, nw: &s.nUp}
	s.clk.touch() // resolving and dialling are not the client's idleness
	return nil
}

func (s *session) connect(br *bufio.Reader, host string, ip netip.Addr, port int) {
	if r := s.open(host, ip, port); r != nil {
		s.refuseHTTP(r)
		return
	}
	// RFC 9110 §9.3.6: a 2xx to CONNECT carries no Content-Length or
	// Transfer-Encoding; the tunnel starts right after the blank line.
	if _, err := s.cm.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		s.fail(err)
		return
	}
	s.tunnel(br)
}

// tunnel copies both ways until both sides have finished sending. br holds
// whatever the client sent ahead of the tunnel (a TLS ClientHello, say).
func (s *session) tunnel(br *bufio.Reader) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pipe(s.um, br, s.upc)
	}()
	s.pipe(s.cm, s.um, s.client)
	<-done
	s.complete()
}

// pipe copies src to dst until EOF and then half-closes dst's connection so
// that the far end sees the EOF too; on an error it cuts the session.
func (s *session) pipe(dst io.Writer, src io.Reader, dstConn net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		// A reset from either end closes the tunnel but is no failure of
		// the attempt: the proxy cannot see inside, and TLS peers routinely
		// close with bytes unread (a session ticket, a close_notify racing
		// the other side's close), which makes the kernel send a reset.
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			s.fail(err)
		}
		s.cut()
		return
	}
	if cw, ok := dstConn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// hopByHop are the header fields that describe one connection, not the
// message, and so stop at a proxy (RFC 9110 §7.6.1), plus the proxy's own
// credentials and challenges (RFC 9110 §11.7.1, §11.7.2): the payload's
// Proxy-Authorization is never forwarded. Trailer and Transfer-Encoding are
// regenerated from the message framing by net/http.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func stripHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, f := range hopByHop {
		h.Del(f)
	}
}

// bodyReader remembers a failure reading the client's request body, which
// net/http's Request.Write does not expose.
type bodyReader struct {
	io.ReadCloser
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// forward relays one absolute-form request and its response.
func (s *session) forward(req *http.Request, host string, ip netip.Addr, port int) {
	// RFC 9110 §10.1.1: the proxy answers 100-continue itself once the
	// destination is open, and refuses expectations it does not know.
	expect := req.Header.Get("Expect")
	if expect != "" && !strings.EqualFold(expect, "100-continue") {
		s.refuse(417, fmt.Sprintf("expectation %q is not supported", expect))
		return
	}
	if r := s.open(host, ip, port); r != nil {
		s.refuseHTTP(r)
		return
	}
	body := &bodyReader{ReadCloser: req.Body}
	out := outgoing(req, body, host, port)
	if expect != "" {
		if _, err := s.cm.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			s.fail(err)
			return
		}
	}

	// Send the request while reading the response, as a client must: a
	// destination may answer (413, say) before it has read the whole body.
	werr := make(chan error, 1)
	go func() {
		upW := bufio.NewWriter(s.um)
		err := out.Write(upW)
		if err == nil {
			err = upW.Flush()
		}
		// Request.Write wraps every body copy error in an unexported type
		// with no Unwrap, so look at what each side saw instead.
		var ce *capError
		switch {
		case body.err != nil:
			// The client broke off its own request: nothing to answer.
			s.fail(fmt.Errorf("reading the request body: %w", body.err))
			s.cut()
		case errors.As(s.um.werr, &ce):
			s.fail(ce)
			s.cut()
		}
		// Any other write error is the destination hanging up, which the
		// response read below reports, or which follows a complete response.
		werr <- err
	}()
	defer func() { <-werr }()
	defer s.cut() // stops an upload the destination no longer reads

	resp, err := s.readResponse(out)
	if err != nil {
		s.fail(fmt.Errorf("response from %s: %w", s.rec.Addr, err))
		s.mu.Lock()
		reason := oneLine(s.err.Error())
		s.mu.Unlock()
		s.say(errorResponse(502, reason))
		return
	}
	defer resp.Body.Close()
	stripHopByHop(resp.Header)
	resp.Header.Add("Via", "1.1 sbx")
	// We speak HTTP/1.1 to the client whatever the destination spoke (RFC
	// 9110 §6.2). A close-delimited body is re-framed as chunked for a 1.1
	// client, so that a cut (byte cap, idle) shows as a truncated message
	// instead of passing for a complete one.
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	if req.ProtoAtLeast(1, 1) && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && resp.Body != http.NoBody {
		resp.TransferEncoding = []string{"chunked"}
	}
	resp.Close = true
	cw := bufio.NewWriter(s.cm)
	err = resp.Write(cw)
	if err == nil {
		err = cw.Flush()
	}
	if err != nil {
		s.fail(err)
		return
	}
	s.complete()
}

// outgoing builds the request for the destination: origin-form target, Host
// from the checked target (never the client's Host header), hop-by-hop
// fields stripped, and Connection: close.
func outgoing(req *http.Request, body io.ReadCloser, host string, port int) *http.Request {
	h := req.Header.Clone()
	stripHopByHop(h)
	h.Del("Expect")
	h.Add("Via", "1.1 sbx") // RFC 9110 §7.6.3
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // or Request.Write adds Go's own
	}
	hostHeader := host
	if strings.Contains(host, ":") {
		hostHeader = "[" + host + "]"
	}
	if port != 80 {
		hostHeader += ":" + strconv.Itoa(port)
	}
	return &http.Request{
		Method: req.Method,
		URL: &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath,
			RawQuery: req.URL.RawQuery, ForceQuery: req.URL.ForceQuery},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:           h,
		Body:             body,
		ContentLength:    req.ContentLength,
		TransferEncoding: req.TransferEncoding,
		Trailer:          req.Trailer,
		Host:             hostHeader,
		Close:            true,
	}
}

// readResponse reads the destination's final response, forwarding 1xx
// interim responses to the client as RFC 9110 §15.2 requires of a proxy.
func (s *session) readResponse(out *http.Request) (*http.Response, error) {
	hl := &headerLimit{r: s.um, n: maxResponseHeaderBytes}
	ur := bufio.NewReader(hl)
	for i := 0; ; i++ {
		resp, err := http.ReadResponse(ur, out)
		if hl.hit {
			return nil, fmt.Errorf("response header larger than %d bytes", maxResponseHeaderBytes)
		}
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 {
			hl.lift()
			return resp, nil
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("101 Switching Protocols, though the proxy strips Upgrade")
		}
		if i == 8 {
			return nil, errors.New("more than 8 interim (1xx) responses")
		}
		stripHopByHop(resp.Header)
		cw := bufio.NewWriter(s.cm)
		fmt.Fprintf(cw, "HTTP/1.1 %s\r\n", resp.Status)
		resp.Header.Write(cw)
		cw.WriteString("\r\n")
		if err := cw.Flush(); err != nil {
			return nil, err
		}
	}
}
