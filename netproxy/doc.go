// Package netproxy is sbx's egress proxy: the only way out of a sandbox that
// runs with --net allow. It serves HTTP forward proxying, CONNECT tunnels
// and SOCKS5 on one listener, lets through only the destinations an
// allowlist names, and records every attempt.
//
// # How it plugs in
//
// The sandbox has its own network namespace with only lo. Its init listens
// on 127.0.0.1:3128 there and hands the listening socket to the supervisor,
// which wraps it with net.FileListener and calls Serve. Each connection the
// payload makes to 127.0.0.1:3128 is accepted here, on the host side, and
// the destination is dialled from the host's network namespace. Names are
// resolved here only, after the allowlist check: the sandbox's DNS stub
// (dns.go: ServeDNS, ServeDNSTCP) answers from the allowlist alone, with a
// loopback address reserved for each listed name, and ServeForward carries
// connections to those addresses like CONNECT (transparent.go).
//
//	p, err := netproxy.New(netproxy.Config{Allow: []string{"api.example.com"}})
//	go p.Serve(l)  // returns nil once l is closed
//	...
//	p.Close()      // no goroutine and no socket of the proxy left after this
//	res.Network = p.Attempts()
//
// Inside, set HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (and the lower-case
// forms) to http://127.0.0.1:3128; ALL_PROXY=socks5h://127.0.0.1:3128 also
// works. NO_PROXY should hold only the sandbox's own services (NoProxy): a
// client that bypasses the proxy for 127.0.0.1 reaches only the sandbox's
// own loopback, so an allowlisted loopback target must not be in it.
//
// # Protocols
//
// The first byte of a connection picks the protocol: 0x05 is SOCKS5, 0x04
// is SOCKS4 (refused), anything else is HTTP/1.x.
//
//   - HTTP forward proxying (RFC 9112 §3.2.2): absolute-form http:// targets
//     only. https:// must come through CONNECT; origin-form, other schemes,
//     userinfo and fragments get 400. The destination gets an origin-form
//     request whose Host is the checked target (the client's Host header
//     is ignored), without the hop-by-hop fields of RFC 9110 §7.6.1 (those
//     listed in Connection too) and never with Proxy-Authorization; Via is
//     added. Expect: 100-continue is answered by the proxy itself once the
//     destination is open (RFC 9110 §10.1.1); other expectations get 417.
//     1xx responses are forwarded (RFC 9110 §15.2), 101 is refused since
//     Upgrade is stripped. Responses go to the client as HTTP/1.1; a
//     close-delimited body is re-framed as chunked for a 1.1 client so a
//     cut body shows as truncated.
//   - CONNECT (RFC 9110 §9.3.6): authority-form HOST:PORT, any port the
//     allowlist allows. The 200 carries no framing fields; the tunnel
//     starts after it, with bytes the client sent early passed on.
//   - SOCKS5 (RFC 1928): no authentication (0x00) only, CONNECT only;
//     IPv4, IPv6 and name (socks5h) targets, checked exactly as HTTP
//     targets. BIND and UDP ASSOCIATE get reply 7. The bound address in
//     replies is always 0.0.0.0:0.
//
// Keep-alive is off on purpose: a connection carries one request, one
// tunnel or one SOCKS5 CONNECT, and the proxy sends Connection: close
// both ways. One connection is then one decision and one record, and no
// request can ride on a connection another request opened.
//
// # Allowlist
//
// Patterns (see ParseAllow): "api.example.com", "api.example.com:443",
// "*.example.org", "*.example.org:443", "10.0.0.5", "10.0.0.5:8080",
// "::1", "[::1]:80". No port means any port. Deny by default: an empty
// list allows nothing.
//
//   - Names compare case-insensitively with one trailing dot dropped.
//   - "*.example.org" matches any name with one or more whole labels in
//     front of ".example.org": a.example.org and a.b.example.org, but not
//     example.org itself (list it too), nor badexample.org, nor
//     example.org.evil.com. The wildcard is only the whole leftmost label,
//     and must leave at least two labels ("*.com" is refused).
//   - IDNA: non-ASCII names are refused, in patterns and in requests,
//     rather than mapped; write and send the xn-- (punycode) form, which
//     compares byte for byte. The standard library has no IDNA mapping,
//     and a wrong one would be a matching bug at a security boundary.
//   - Names whose last label does not start with a letter are refused
//     (RFC 3696 §2), which keeps the numeric forms that inet_aton reads as
//     addresses (127.1, 0x7f000001, 2130706433) from posing as names; IP
//     literals must be dotted-quad IPv4 or IPv6, without a zone.
//     IPv4-mapped IPv6 literals are treated as the IPv4 address.
//
// # Addresses
//
// The special ranges of RFC 6890 and the IANA special-purpose registries
// are refused unless the allowlist names them explicitly: unspecified,
// loopback, link-local (169.254.0.0/16 with the cloud metadata address,
// fe80::/10), private (RFC 1918, fc00::/7), CGNAT 100.64.0.0/10, multicast,
// broadcast, reserved, documentation and benchmarking blocks, and IPv6
// outside 2000::/3. IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4 forms are
// judged by the IPv4 address they carry.
//
// "Explicitly" means either the literal address (with the port, if the
// pattern has one) is on the list, or the request names a host that is on
// the list exactly (not through a wildcard) and a Resolve pin maps it to
// that address. A name the resolver maps to a special address is refused
// unless the address itself is listed. Public IP literals must be listed
// too: deny by default.
//
// A name is resolved once per attempt, every address returned is checked,
// and one special address refuses the whole name (mixing public and
// internal answers is a rebinding setup). The proxy then dials the checked
// addresses, in order, as numeric IP:PORT, and nothing else: no second
// resolution can slip a different address in (DNS rebinding).
//
// Resolve pins, like curl --resolve: "NAME:PORT" -> "ADDR" applies to that
// port, "NAME" -> "ADDR" to every port, and the former wins. ADDR may be a
// comma-separated list and each entry may carry a port ("127.0.0.1:8080",
// "[::1]:8080"), which then replaces the requested port. A pin only
// resolves: the name must still pass the allowlist.
//
// # Answers
//
//	400  malformed request, bad target (the reason says what)
//	403  refused by the allowlist or the address rules
//	408  request header not complete within HeaderTimeout
//	417  an Expect other than 100-continue
//	429  MaxConns connections already open, a byte cap already used up,
//	     or refusals over their rate limit (see Limits)
//	431  request header over MaxHeaderBytes
//	501  a method other than GET, HEAD, POST, PUT, DELETE, CONNECT,
//	     OPTIONS, TRACE and PATCH (RFC 9110 §15.6.2), answered after at
//	     most 8 bytes of the request line
//	502  resolving or dialling an allowed destination failed, or its
//	     response was bad or idle
//
// Every error body is one line: "sbx proxy: <reason>". Over MaxConns and
// over the refusal rate limit the 429 is written at accept time without
// reading the request, so a client may see the connection closed (or
// reset) instead. A connection that
// crosses a byte cap or the idle timeout mid-transfer is cut (closed)
// without a further answer. For SOCKS5 the same decisions are reply codes:
// 2 refused (allowlist, addresses, caps), 4 host unreachable, 5 connection
// refused, 1 malformed, 7 command, 8 address type; the reason is only in
// the record.
//
// # Limits
//
// MaxConns (default 32) caps the client connections open at once,
// including ones still sending their header. MaxBytesUp and MaxBytesDown
// cap the bytes sent to and received from destinations over the whole run,
// across all connections (0: unlimited); totals never exceed them.
// IdleTimeout (default 60s) cuts a connection on which no byte moved in
// either direction for that long; resolving and dialling do not count.
// HeaderTimeout (default 10s) bounds the time from accept to the end of
// the request header or SOCKS5 handshake, however slowly bytes trickle.
// Headers are capped at MaxHeaderBytes (32 KiB), destination response
// headers at 256 KiB. Resolving is bounded by 10s and each dial by 10s.
//
// Refusals are rate-limited per proxy, that is per run, because the
// supervisor's CPU is outside every quota of the run (issue 11, finding
// 9): every connection takes a token from a bucket of RefusalBurst
// (default 64), refilled at RefusalRate a second (default 10), and gives
// it back once a destination is dialled, so only attempts that end
// refused or failed before reaching a destination use the budget.
// Allowed connections cost none, however many or long, but past the
// budget a connection cannot be told from the flood without reading it:
// while the bucket is empty the accept loop closes what waits in the
// backlog, unread, every 50 ms, and serves the next connection once a
// token is back. Summary.RateLimited counts those closed unread.
//
// # Records
//
// Attempts returns one Attempt per accepted connection, in accept order,
// once that connection has ended (all of them after Close), up to
// MaxAttempts records or MaxAttemptBytes (256 KiB) of their JSON,
// whichever comes first; AttemptsDropped counts the rest, and Summary
// counts every attempt, listed or not. Each field of a record is cut to a
// bound (method 16 bytes, host 255, reason and error 512, addr 64; a cut
// ends in "..."), so that nothing a payload sends can grow the records,
// the Result or the audit line past a fixed size (issue 11, finding 1). Reason says why the proxy
// refused (it is also the body of the error response); Error says what
// ended an allowed attempt abnormally: a failed resolve or dial, a byte
// cap, the idle timeout, "proxy closed", a broken request or response. A
// reset from either end of a tunnel ends it without an Error: TLS peers
// routinely close with bytes unread. BytesUp and BytesDown count bytes to
// and from the destination, not the client.
//
// Take, for a proxy that serves a session's many cells, returns the
// records that ended since the last Take with that span's Summary (the
// counters' increase) and the connections still open, and forgets the
// records it returned: the caps above then hold per span. Attempts and
// Summary's Recorded see only what no Take has taken yet.
package netproxy
