package spec

// DNSStubIP is the DNS stub's address inside the sandbox: resolv.conf
// names it. It is the address systemd-resolved uses, on the sandbox's own
// loopback; the supervisor answers on it from the host side (issue 18).
const DNSStubIP = "127.0.0.53"

// The egress proxy's records (netproxy fills them): what the Result's
// network and network_summary hold.

// Attempt is the record of one client connection: with keep-alive disabled,
// one request, CONNECT or SOCKS5 session.
type Attempt struct {
	// Kind is KindDNS for a lookup the DNS stub refused, KindForward for
	// a connection to a name's reserved address, "" for the proxy's own.
	Kind       string `json:"kind,omitempty"`
	Host       string `json:"host"`             // normalised name or IP literal; "" if no request was read
	Port       int    `json:"port"`             // destination port asked for
	Method     string `json:"method"`           // "CONNECT", "GET", ..., "SOCKS5", or "" if no request was read
	Allowed    bool   `json:"allowed"`          // passed the allowlist and the address checks
	Reason     string `json:"reason,omitempty"` // why it was refused, one line
	Addr       string `json:"addr,omitempty"`   // the address actually dialled
	BytesUp    int64  `json:"bytes_up"`         // bytes sent to the destination
	BytesDown  int64  `json:"bytes_down"`       // bytes received from the destination
	DurationMS int64  `json:"duration_ms"`      // accept to close
	Error      string `json:"error,omitempty"`  // what ended it abnormally, one line
}

// Attempt kinds besides the proxy's own (Attempt.Kind "").
const (
	KindDNS     = "dns"
	KindForward = "forward"
)

// Summary counts every attempt of a run, listed in Attempts or not.
type Summary struct {
	// Attempts is every connection accepted: Recorded + Dropped +
	// RateLimited once the proxy is closed.
	Attempts int `json:"attempts"`
	// Recorded is how many Attempts lists.
	Recorded int `json:"recorded"`
	// Dropped were served but not listed: the log already held
	// netproxy.MaxAttempts records or MaxAttemptBytes of them.
	Dropped int `json:"dropped"`
	// Refused counts the attempts that were read and then refused or
	// failed before a destination answered (listed or not): what the
	// refusal rate limit counts.
	Refused int `json:"refused"`
	// RateLimited were closed at accept time without being read: refusals
	// had used up their budget (netproxy.RefusalBurst at once, then
	// RefusalRate a second).
	RateLimited int `json:"rate_limited"`
	// DNS counts the DNS stub's queries (not attempts: a refused name is
	// one attempt however often it is asked for).
	DNS DNSSummary `json:"dns"`
}

// Truncated says that Attempts does not list every attempt.
func (s Summary) Truncated() bool {
	return s.Dropped > 0 || s.RateLimited > 0 || s.DNS.RateLimited > 0
}

// DNSSummary counts the stub's queries over the run.
type DNSSummary struct {
	Queries     int `json:"queries"`      // every query read, answered or not
	Refused     int `json:"refused"`      // NXDOMAIN for a name not on the list
	Malformed   int `json:"malformed"`    // oversized or unparsable, or not a plain query
	RateLimited int `json:"rate_limited"` // dropped unanswered past the rate limit, or TCP connections over the cap
}

// Forward is one transparent listener: Name's reserved address and one of
// its allowed ports. For a wildcard's address Name is "" and Pattern the
// wildcard: the address goes to the first name under it that the stub is
// asked for (netproxy.Proxy.wildName).
//
// The address is IP:Port, always IPv4 (netproxy reserves them in
// 127.1.0.0/16, netproxy/dns.go), as plain bytes rather than a
// netip.AddrPort: the init binds it and needs nothing else of it, and
// importing net/netip alone (its package init, and the methods JSON keeps
// of a decoded netip type) is ~90 KB of the image every sandbox copies
// into a memfd (issue 13). netproxy's forwardAddr makes it a netip.AddrPort.
type Forward struct {
	Name    string  `json:"name,omitempty"`
	Pattern string  `json:"pattern,omitempty"`
	IP      [4]byte `json:"ip"`
	Port    uint16  `json:"port"`
}
