package netproxy

import "github.com/sbx-sandbox/sbx/netproxy/allowlist"

// The allowlist's grammar is its own package (netproxy/allowlist), without
// cgo and without the proxy, so that the profile parser refuses a pattern
// with the same code and builds without libseccomp (issue 12, item 6).

// Allowlist is a parsed list of destination patterns (allowlist.List).
type Allowlist = allowlist.List

// ParseAllow parses allowlist patterns (allowlist.Parse says how).
func ParseAllow(patterns []string) (*Allowlist, error) { return allowlist.Parse(patterns) }

// The host and port syntax the proxy reads from its clients, the same as
// the allowlist's.
var (
	splitHostPort = allowlist.SplitHostPort
	parsePort     = allowlist.ParsePort
	parseHost     = allowlist.ParseHost
	normalizeName = allowlist.NormalizeName
)
