package netproxy

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseAllowRefuses(t *testing.T) {
	for _, tc := range []struct {
		pattern, why string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"*", "every host"},
		{"*:443", "every host"},
		{"*.com", "too broad"},
		{"*.com:443", "too broad"},
		{"a*.example.org", "whole leftmost label"},
		{"*example.org", "whole leftmost label"},
		{"foo.*.org", "whole leftmost label"},
		{"*.*.example.org", "whole leftmost label"},
		{"*.10.0.0.5", "not to addresses"},
		{"http://api.example.com", "URL"},
		{"api.example.com/v1", "URL"},
		{"user@api.example.com", "URL"},
		{"api.example.com:0", "1 to 65535"},
		{"api.example.com:65536", "1 to 65535"},
		{"api.example.com:http", "1 to 65535"},
		{"api.example.com:+80", "1 to 65535"},
		{"api.example.com:", "empty port"},
		{"[::1", "missing ]"},
		{"[::1]x", "after ]"},
		{"[1.2.3.4]:80", "brackets are for IPv6"},
		{"[api.example.com]", "not an IPv6 literal"},
		{"fe80::1%eth0", "zone"},
		{"[fe80::1%25eth0]:80", "zone"},
		{"bücher.example", "IDNA"},
		{"127.1", "dotted-quad"},
		{"0x7f000001", "dotted-quad"},
		{"2130706433", "dotted-quad"},
		{"010.0.0.1", "dotted-quad"},
		{"1.2.3.4.5", "dotted-quad"},
		{"-a.example.com", "hyphen"},
		{"a-.example.com", "hyphen"},
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"a b.example.com", "invalid character"},
		{strings.Repeat("a", 64) + ".example.com", "longer than 63"},
		{strings.Repeat("abcdefghi.", 26) + "com", "longer than 253"},
		{"x.com:80:90", "invalid character"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			_, err := ParseAllow([]string{"ok.example.com", tc.pattern})
			if err == nil {
				t.Fatalf("ParseAllow(%q) = nil error", tc.pattern)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.why) || !strings.Contains(msg, strconv.Quote(tc.pattern)) {
				t.Errorf("error %q should name the pattern and say %q", msg, tc.why)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line", msg)
			}
		})
	}
}

func TestParseAllowCanonical(t *testing.T) {
	a, err := ParseAllow([]string{" API.Example.COM. ", "*.Example.org:443", "10.0.0.5:8080", "[::1]:80", "::1", "::ffff:10.1.2.3", "xn--bcher-kva.example"})
	if err != nil {
		t.Fatal(err)
	}
	want := "api.example.com,*.example.org:443,10.0.0.5:8080,[::1]:80,[::1],10.1.2.3,xn--bcher-kva.example"
	if got := a.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestAllowlistMatch(t *testing.T) {
	a, err := ParseAllow([]string{
		"api.example.com",
		"*.example.org",
		"pay.example.net:443",
		"*.cdn.example.net:8443",
		"10.0.0.5:8080",
		"[::1]:80",
		"192.168.1.1",
		"xn--bcher-kva.example",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.example.com", 443, true},
		{"api.example.com", 1, true}, // no port in the pattern: any port
		{"API.EXAMPLE.COM", 80, true},
		{"api.example.com.", 80, true},
		{"api.example.com..", 80, false},
		{"x.api.example.com", 80, false}, // exact names do not cover subdomains
		{"example.com", 80, false},
		{"api.example.com.evil.test", 80, false},

		{"a.example.org", 80, true},
		{"a.b.example.org", 80, true}, // any depth
		{"A.Example.Org.", 80, true},
		{"example.org", 80, false}, // not the apex
		{"badexample.org", 80, false},
		{"example.org.evil.com", 80, false},
		{"a.example.org.evil.com", 80, false},
		{"aexample.org", 80, false},

		{"pay.example.net", 443, true},
		{"pay.example.net", 80, false},
		{"a.cdn.example.net", 8443, true},
		{"a.cdn.example.net", 443, false},

		{"10.0.0.5", 8080, true},
		{"10.0.0.5", 80, false},
		{"::ffff:10.0.0.5", 8080, true}, // IPv4-mapped is the same address
		{"[::ffff:10.0.0.5]", 8080, true},
		{"10.0.0.6", 8080, false},
		{"::1", 80, true},
		{"[::1]", 80, true},
		{"::1", 443, false},
		{"0:0:0:0:0:0:0:1", 80, true},
		{"192.168.1.1", 22, true},
		{"127.0.0.1", 80, false},

		{"xn--bcher-kva.example", 80, true},
		{"bücher.example", 80, false}, // refused, not converted
		{"127.1", 80, false},
		{"", 80, false},
	} {
		if got := a.Allows(tc.host, tc.port); got != tc.want {
			t.Errorf("Allows(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestEmptyAllowlistAllowsNothing(t *testing.T) {
	a, err := ParseAllow(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"example.com", "127.0.0.1", "::1", "localhost"} {
		if a.Allows(h, 80) {
			t.Errorf("empty allowlist allows %s", h)
		}
	}
}

// An exact rule wins over a wildcard, because only an exact rule lets a pin
// reach a special address.
func TestMatchNamePrefersExact(t *testing.T) {
	a, err := ParseAllow([]string{"*.example.org", "api.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	r := a.MatchName("api.example.org", 80)
	if r == nil || r.Wild {
		t.Fatalf("MatchName = %+v, want the exact rule", r)
	}
	if r := a.MatchName("b.example.org", 80); r == nil || !r.Wild {
		t.Fatalf("MatchName(b.example.org) = %+v, want the wildcard", r)
	}
}

func TestRequestTargetHosts(t *testing.T) {
	for _, tc := range []struct {
		in       string
		wantHost string
		wantErr  string
	}{
		{"Api.Test.", "api.test", ""},
		{"127.0.0.1", "127.0.0.1", ""},
		{"::ffff:127.0.0.1", "127.0.0.1", ""},
		{"::ffff:7f00:1", "127.0.0.1", ""},
		{"127.1", "", "dotted-quad"},
		{"127.0.0.01", "", "dotted-quad"},
		{"0x7f.0.0.1", "", "dotted-quad"},
		{"0177.0.0.1", "", "dotted-quad"},
		{"4294967295", "", "dotted-quad"},
		{"fe80::1%lo", "", "zone"},
		{"exämple.test", "", "IDNA"},
		{"a_b.test", "a_b.test", ""},
		{"host.9x", "", "neither a host name"},
		{"localhost", "localhost", ""},
	} {
		name, ip, err := parseHost(tc.in, false)
		got := name
		if ip.IsValid() {
			got = ip.String()
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("parseHost(%q): %v", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseHost(%q) = %q, %v; want error with %q", tc.in, got, err, tc.wantErr)
		case tc.wantErr == "" && got != tc.wantHost:
			t.Errorf("parseHost(%q) = %q, want %q", tc.in, got, tc.wantHost)
		}
	}
}
