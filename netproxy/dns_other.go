//go:build !linux

package netproxy

import (
	"net"
	"os"
)

// dropCounter cannot tell elsewhere.
func dropCounter(pc net.PacketConn) func() int64 { return func() int64 { return -1 } }

// queuedReader cannot read without blocking elsewhere.
func queuedReader(f *os.File) (func(b []byte) int, func() int, func()) {
	return func([]byte) int { return 0 }, func() int { return 0 }, func() {}
}
