package netproxy

import (
	"fmt"
	"net/netip"
)

// specialRange is an address block that is not a public unicast destination.
type specialRange struct {
	prefix netip.Prefix
	what   string
}

func sr(prefix, what string) specialRange {
	return specialRange{netip.MustParsePrefix(prefix), what}
}

// The special-purpose blocks of RFC 6890 and the IANA special-purpose
// registries that a sandboxed payload must not reach unless the allowlist
// names the address itself. More specific entries come first so that the
// reason names the narrowest block.
var specialV4 = []specialRange{
	sr("0.0.0.0/8", `unspecified, "this network" (0.0.0.0/8, RFC 1122)`),
	sr("10.0.0.0/8", "private (10.0.0.0/8, RFC 1918)"),
	sr("100.64.0.0/10", "carrier-grade NAT (100.64.0.0/10, RFC 6598)"),
	sr("127.0.0.0/8", "loopback (127.0.0.0/8, RFC 1122)"),
	sr("169.254.0.0/16", "link-local, home of cloud metadata (169.254.0.0/16, RFC 3927)"),
	sr("172.16.0.0/12", "private (172.16.0.0/12, RFC 1918)"),
	sr("192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24, RFC 6890)"),
	sr("192.0.2.0/24", "documentation (192.0.2.0/24, RFC 5737)"),
	sr("192.88.99.0/24", "6to4 relay anycast (192.88.99.0/24, RFC 7526)"),
	sr("192.168.0.0/16", "private (192.168.0.0/16, RFC 1918)"),
	sr("198.18.0.0/15", "benchmarking (198.18.0.0/15, RFC 2544)"),
	sr("198.51.100.0/24", "documentation (198.51.100.0/24, RFC 5737)"),
	sr("203.0.113.0/24", "documentation (203.0.113.0/24, RFC 5737)"),
	sr("224.0.0.0/4", "multicast (224.0.0.0/4, RFC 5771)"),
	sr("255.255.255.255/32", "limited broadcast (255.255.255.255, RFC 919)"),
	sr("240.0.0.0/4", "reserved (240.0.0.0/4, RFC 1112)"),
}

var specialV6 = []specialRange{
	sr("::/128", "unspecified (::, RFC 4291)"),
	sr("::1/128", "loopback (::1, RFC 4291)"),
	sr("::/96", "IPv4-compatible, deprecated (::/96, RFC 4291)"),
	sr("64:ff9b:1::/48", "local-use NAT64 (64:ff9b:1::/48, RFC 8215)"),
	sr("100::/64", "discard-only (100::/64, RFC 6666)"),
	sr("2001::/23", "IETF protocol assignments, incl. Teredo (2001::/23, RFC 2928)"),
	sr("2001:db8::/32", "documentation (2001:db8::/32, RFC 3849)"),
	sr("3fff::/20", "documentation (3fff::/20, RFC 9637)"),
	sr("5f00::/16", "SRv6 SIDs (5f00::/16, RFC 9602)"),
	sr("fc00::/7", "unique local, private (fc00::/7, RFC 4193)"),
	sr("fe80::/10", "link-local (fe80::/10, RFC 4291)"),
	sr("fec0::/10", "site-local, deprecated (fec0::/10, RFC 3879)"),
	sr("ff00::/8", "multicast (ff00::/8, RFC 4291)"),
}

var (
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: IPv4 in the last 32 bits
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056: IPv4 in bits 16..47
	globalV6    = netip.MustParsePrefix("2000::/3")     // RFC 4291 §2.4: global unicast
	mappedV4pfx = netip.MustParsePrefix("::ffff:0:0/96")
)

// classify says why a is not a public unicast address, or returns "" when
// it is. IPv4-mapped addresses are judged as the IPv4 address they carry
// (RFC 4291 §2.5.5.2), and so are the NAT64 (RFC 6052) and 6to4 (RFC 3056)
// forms, whose gateways would deliver to that IPv4 address. Any other IPv6
// address outside 2000::/3 is reserved by IETF and refused.
func classify(a netip.Addr) string {
	if a.Zone() != "" {
		return "scoped (has an IPv6 zone)"
	}
	if mappedV4pfx.Contains(a) {
		a = a.Unmap()
	}
	if a.Is4() {
		for _, r := range specialV4 {
			if r.prefix.Contains(a) {
				return r.what
			}
		}
		return ""
	}
	b := a.As16()
	if nat64.Contains(a) {
		v4 := netip.AddrFrom4([4]byte(b[12:16]))
		if why := classify(v4); why != "" {
			return fmt.Sprintf("NAT64 form of %s, %s", v4, why)
		}
		return ""
	}
	if sixToFour.Contains(a) {
		v4 := netip.AddrFrom4([4]byte(b[2:6]))
		if why := classify(v4); why != "" {
			return fmt.Sprintf("6to4 form of %s, %s", v4, why)
		}
		return ""
	}
	for _, r := range specialV6 {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if !globalV6.Contains(a) {
		return "reserved, outside global unicast 2000::/3 (RFC 4291)"
	}
	return ""
}
