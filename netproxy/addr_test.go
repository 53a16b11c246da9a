package netproxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string // substring of the reason; "" for a public address
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"10.0.0.1", "private (10.0.0.0/8"},
		{"10.255.255.255", "private"},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.64.0.0", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"100.128.0.0", ""},
		{"127.0.0.1", "loopback (127.0.0.0/8"},
		{"127.255.255.254", "loopback"},
		{"169.254.169.254", "link-local"},
		{"169.254.0.1", "link-local"},
		{"169.255.0.1", ""},
		{"172.15.255.255", ""},
		{"172.16.0.0", "private (172.16.0.0/12"},
		{"172.31.255.255", "private"},
		{"172.32.0.0", ""},
		{"192.0.0.8", "IETF protocol"},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"192.168.0.1", "private (192.168.0.0/16"},
		{"192.169.0.1", ""},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.20.0.0", ""},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},

		{"2606:4700:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"::", "unspecified"},
		{"::1", "loopback (::1"},
		{"::ffff:127.0.0.1", "loopback (127.0.0.0/8"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:10.1.1.1", "private"},
		{"::ffff:8.8.8.8", ""},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::127.0.0.1", "NAT64 form of 127.0.0.1, loopback"},
		{"64:ff9b::169.254.169.254", "NAT64 form of 169.254.169.254"},
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"2002:7f00:1::1", "6to4 form of 127.0.0.1"},
		{"2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254"},
		{"2002:808:808::1", ""},
		{"100::1", "discard"},
		{"2001::1", "Teredo"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"5f00::1", "SRv6"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fe80::1", "link-local (fe80::/10"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"4000::1", "outside global unicast"},
		{"1::1", "outside global unicast"},
		{"fe80::1%eth0", "zone"},
	} {
		got := classify(netip.MustParseAddr(tc.addr))
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("classify(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// Every special range must cite where it comes from.
func TestSpecialRangesCiteRFC(t *testing.T) {
	for _, r := range append(append([]specialRange{}, specialV4...), specialV6...) {
		if !strings.Contains(r.what, "RFC ") {
			t.Errorf("%s: %q cites no RFC", r.prefix, r.what)
		}
	}
}
