// Package allowlist is the grammar of sbx's egress allowlist: the patterns
// a profile's network.allow lists, parsed into rules, and the host and
// port syntax the proxy reads from its clients. It is plain Go without
// cgo and without the proxy, so that the profile parser checks a pattern
// with the very code the proxy runs, and builds with CGO_ENABLED=0.
package allowlist

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// List is a parsed list of destination patterns. It is immutable once
// built and safe for concurrent use.
type List struct {
	rules []Rule
}

// Rule is one allowlist pattern.
type Rule struct {
	Pattern string     // canonical form, for messages
	Name    string     // the exact name, or for a wildcard the suffix after "*."
	Wild    bool       // "*.suffix": one or more whole labels before the suffix
	Addr    netip.Addr // valid for an IP-literal rule (unmapped)
	Port    int        // 0: any port
}

// PortOK reports whether the rule allows port.
func (r *Rule) PortOK(port int) bool { return r.Port == 0 || r.Port == port }

// Rules lists the rules in the order of the patterns; the caller must not
// change them.
func (a *List) Rules() []Rule { return a.rules }

// Parse parses allowlist patterns:
//
//	api.example.com        that name, any port
//	api.example.com:443    that name, port 443
//	*.example.org          any name ending in ".example.org" (not example.org itself)
//	*.example.org:443      the same, port 443
//	10.0.0.5  10.0.0.5:8080  ::1  [::1]:80   IP literals, any port or one port
//
// Names are compared case-insensitively with one trailing dot removed. A
// wildcard is only the whole leftmost label and must leave at least two
// labels ("*.com" is refused as too broad). Non-ASCII names are refused:
// write their IDNA (xn--) form. The error for a bad pattern names it and
// says why; an empty list is valid and allows nothing.
func Parse(patterns []string) (*List, error) {
	a := &List{}
	for _, p := range patterns {
		r, err := parseRule(p)
		if err != nil {
			return nil, err
		}
		a.rules = append(a.rules, r)
	}
	return a, nil
}

// Allows reports whether host:port is on the list, by name or by literal
// address, without resolving anything. host may be a name, an IPv4 literal
// or an IPv6 literal with or without brackets.
func (a *List) Allows(host string, port int) bool {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	name, ip, err := ParseHost(h, strings.HasPrefix(host, "["))
	if err != nil {
		return false
	}
	if ip.IsValid() {
		return a.MatchAddr(ip, port) != nil
	}
	return a.MatchName(name, port) != nil
}

// String returns the patterns in canonical form, comma-separated.
func (a *List) String() string {
	s := make([]string, len(a.rules))
	for i, r := range a.rules {
		s[i] = r.Pattern
	}
	return strings.Join(s, ",")
}

// MatchName returns the rule that allows name:port, preferring an exact rule
// over a wildcard (an exact rule is what lets a --resolve pin reach a special
// address), or nil. name must already be normalised by ParseHost.
func (a *List) MatchName(name string, port int) *Rule {
	var wild *Rule
	for i := range a.rules {
		r := &a.rules[i]
		if r.Addr.IsValid() || !r.PortOK(port) {
			continue
		}
		if !r.Wild && r.Name == name {
			return r
		}
		// Whole labels only: the character before the suffix must be a dot,
		// so "*.example.org" matches neither "badexample.org" nor
		// "example.org.evil.com", and the apex needs its own entry.
		if r.Wild && wild == nil && strings.HasSuffix(name, "."+r.Name) {
			wild = r
		}
	}
	return wild
}

// MatchAddr returns the IP-literal rule that allows ip:port, or nil.
func (a *List) MatchAddr(ip netip.Addr, port int) *Rule {
	ip = ip.Unmap()
	for i := range a.rules {
		r := &a.rules[i]
		if r.Addr.IsValid() && r.Addr == ip && r.PortOK(port) {
			return r
		}
	}
	return nil
}

func parseRule(p string) (Rule, error) {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("allow pattern %q: %s", p, fmt.Sprintf(why, args...))
	}
	s := strings.TrimSpace(p)
	switch {
	case s == "":
		return Rule{}, bad("empty")
	case s == "*" || strings.HasPrefix(s, "*:"):
		return Rule{}, bad("a bare * would allow every host; list the hosts")
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@"):
		return Rule{}, bad("is a URL or has a path; write HOST or HOST:PORT")
	}
	hostPart, portStr, bracketed, err := SplitHostPort(s, true)
	if err != nil {
		return Rule{}, bad("%v", err)
	}
	r := Rule{}
	if portStr != "" {
		if r.Port, err = ParsePort(portStr); err != nil {
			return Rule{}, bad("%v", err)
		}
	}
	if rest, ok := strings.CutPrefix(hostPart, "*."); ok && !bracketed {
		if strings.Contains(rest, "*") {
			return Rule{}, bad("a wildcard is only allowed as the whole leftmost label, as in *.example.org")
		}
		if _, err := netip.ParseAddr(rest); err == nil {
			return Rule{}, bad("wildcards apply to names, not to addresses")
		}
		suffix, err := NormalizeName(rest)
		if err != nil {
			return Rule{}, bad("%v", err)
		}
		if !strings.Contains(suffix, ".") {
			return Rule{}, bad("a wildcard over the single label %q is too broad; name the domain, as in *.example.org", suffix)
		}
		r.Name, r.Wild = suffix, true
	} else {
		if strings.Contains(hostPart, "*") {
			return Rule{}, bad("a wildcard is only allowed as the whole leftmost label, as in *.example.org")
		}
		name, ip, err := ParseHost(hostPart, bracketed)
		if err != nil {
			return Rule{}, bad("%v", err)
		}
		r.Name, r.Addr = name, ip
	}
	r.Pattern = canonical(r)
	return r, nil
}

func canonical(r Rule) string {
	var h string
	switch {
	case r.Addr.Is6():
		h = "[" + r.Addr.String() + "]"
	case r.Addr.IsValid():
		h = r.Addr.String()
	case r.Wild:
		h = "*." + r.Name
	default:
		h = r.Name
	}
	if r.Port != 0 {
		h += ":" + strconv.Itoa(r.Port)
	}
	return h
}

// SplitHostPort splits "host", "host:port", "[v6]", "[v6]:port" and, when
// bareV6 is set, an unbracketed IPv6 literal (which has no port). The port is
// returned as text ("" when absent); an empty port after a colon is an error.
func SplitHostPort(s string, bareV6 bool) (host, port string, bracketed bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, errors.New("missing ] after an IPv6 literal")
		}
		host, rest := s[1:end], s[end+1:]
		switch {
		case rest == "":
			return host, "", true, nil
		case rest[0] == ':' && len(rest) > 1:
			return host, rest[1:], true, nil
		case rest == ":":
			return "", "", false, errors.New("empty port")
		default:
			return "", "", false, fmt.Errorf("unexpected %q after ]", rest)
		}
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return "", "", false, errors.New("empty port")
		}
		return host, port, false, nil
	default:
		if !bareV6 {
			return "", "", false, errors.New("an IPv6 literal must be in brackets")
		}
		return s, "", false, nil
	}
}

// ParsePort accepts decimal 1..65535 and nothing else (no sign, no names).
func ParsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}

// ParseHost classifies a host (already out of its brackets) as an IP literal
// or a name. IPv4-mapped IPv6 literals are unmapped (RFC 4291 §2.5.5.2) so
// that ::ffff:127.0.0.1 is treated as 127.0.0.1 everywhere. netip accepts
// only dotted-quad IPv4; inet_aton forms such as 127.1 or 0x7f000001 fall
// through to NormalizeName, which refuses them.
func ParseHost(h string, bracketed bool) (name string, ip netip.Addr, err error) {
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("IPv6 zone in %q is not allowed", h)
		}
		if bracketed && a.Is4() {
			return "", netip.Addr{}, fmt.Errorf("brackets are for IPv6 literals, not %q", h)
		}
		return "", a.Unmap(), nil
	}
	if bracketed {
		return "", netip.Addr{}, fmt.Errorf("%q in brackets is not an IPv6 literal", h)
	}
	name, err = NormalizeName(h)
	return name, netip.Addr{}, err
}

// NormalizeName lower-cases a host name, drops one trailing dot and checks
// it is a plain ASCII name: labels of 1..63 letters, digits, hyphens or
// underscores, not starting or ending with a hyphen, 253 characters at most
// (RFC 1035 §2.3.4, RFC 1123 §2.1). The last label must start with a letter
// (RFC 3696 §2: top-level domains are not numeric), which keeps the numeric
// forms that inet_aton would read as an address out of the name path.
//
// IDNA: Unicode names are refused rather than converted, since the standard
// library has no IDNA mapping; clients send the xn-- form, and allowlists
// must be written in it, so that names compare byte for byte.
func NormalizeName(h string) (string, error) {
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", fmt.Errorf("non-ASCII name %q: write its IDNA (xn--) form", h)
		}
	}
	n := strings.ToLower(strings.TrimSuffix(h, "."))
	if n == "" {
		return "", errors.New("empty host name")
	}
	if len(n) > 253 {
		return "", fmt.Errorf("name %.40q... is longer than 253 characters", n)
	}
	labels := strings.Split(n, ".")
	for _, l := range labels {
		if l == "" {
			return "", fmt.Errorf("name %q has an empty label", h)
		}
		if len(l) > 63 {
			return "", fmt.Errorf("name %q has a label longer than 63 characters", h)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("name %q has a label starting or ending with a hyphen", h)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("name %q has the invalid character %q", h, c)
			}
		}
	}
	if last := labels[len(labels)-1]; last[0] < 'a' || last[0] > 'z' {
		return "", fmt.Errorf("%q is neither a host name (its last label must start with a letter) nor a dotted-quad or IPv6 address", h)
	}
	return n, nil
}
