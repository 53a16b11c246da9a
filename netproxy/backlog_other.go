//go:build !linux

package netproxy

import "net"

// drainBacklog is Linux-only (accept4); elsewhere the backlog waits for the
// rate limit to pass.
func drainBacklog(l net.Listener) int { return 0 }
