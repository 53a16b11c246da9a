package netproxy

import (
	"net"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dnsRcvBuf is the stub's UDP receive buffer: what may wait while the
// stub is over its rate limit. The kernel doubles it and charges each
// datagram's truesize (about 768 bytes on lo), so it holds some 40
// queries; past it the kernel drops them (socket(7), SO_RCVBUF).
const dnsRcvBuf = 16 << 10

// skMeminfoDrops indexes SO_MEMINFO's array (linux/sock_diag.h,
// SK_MEMINFO_DROPS; SO_MEMINFO since Linux 4.6): the socket's sk_drops,
// datagrams the kernel dropped for want of buffer space.
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// dropCounter shrinks pc's receive buffer and returns a function that
// reads how many datagrams the kernel has dropped on it so far, or -1
// when it cannot tell.
func dropCounter(pc net.PacketConn) func() int64 {
	none := func() int64 { return -1 }
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return none
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return none
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, dnsRcvBuf)
	})
	return func() int64 {
		var mem [skMeminfoVars]uint32
		n := uint32(unsafe.Sizeof(mem))
		var errno unix.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
				uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&n)), 0)
		}); err != nil || errno != 0 || n < (skMeminfoDrops+1)*4 {
			return -1
		}
		return int64(mem[skMeminfoDrops])
	}
}

// queuedReader returns functions on a dup of f's descriptor (the reader
// goroutine holds f's read lock while it waits): read takes, without
// blocking, one packet that waits in f's socket, or returns 0, so that the
// SYNs sent just before the payload ended are still read at Close; drops
// is how many packets the kernel dropped for want of buffer space since
// the last call (PACKET_STATISTICS resets them, packet(7)); done closes
// the dup, once, after which read and drops do nothing.
//
// done closes it on a goroutine of its own, not waited for: called after
// f is closed, the dup is the socket's last reference, and the last close
// of a packet socket waits for an RCU grace period (synchronize_net in
// packet_release, net/packet/af_packet.c), some 10 ms.
func queuedReader(f *os.File) (read func(b []byte) int, drops func() int, done func()) {
	var mu sync.Mutex
	dup := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			dup, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		})
	}
	return func(b []byte) int {
			mu.Lock()
			defer mu.Unlock()
			if dup < 0 {
				return 0
			}
			n, _, err := unix.Recvfrom(dup, b, unix.MSG_DONTWAIT)
			if err != nil || n <= 0 {
				return 0
			}
			return n
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			if dup < 0 {
				return 0
			}
			st, err := unix.GetsockoptTpacketStats(dup, unix.SOL_PACKET, unix.PACKET_STATISTICS)
			if err != nil {
				return 0
			}
			return int(st.Drops)
		}, func() {
			mu.Lock()
			defer mu.Unlock()
			if dup >= 0 {
				go unix.Close(dup)
				dup = -1
			}
		}
}
