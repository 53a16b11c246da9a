package netproxy

import (
	"net/netip"

	"github.com/sbx-sandbox/sbx/nsjail/spec"
)

// The proxy's records are part of the Result, so they are defined with it
// in the cgo-free contract package (issue 12, item 6); these names keep
// netproxy's callers as they were.
type (
	Attempt    = spec.Attempt
	Summary    = spec.Summary
	DNSSummary = spec.DNSSummary
	Forward    = spec.Forward
)

// Attempt kinds besides the proxy's own (Attempt.Kind "").
const (
	KindDNS     = spec.KindDNS
	KindForward = spec.KindForward
)

// forwardAddr is fw's listener address (spec.Forward says why it is kept
// as plain bytes).
func forwardAddr(fw Forward) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(fw.IP), fw.Port)
}
