package netproxy

import (
	"net"
	"syscall"
)

// maxDrain bounds one drainBacklog call: the listen backlog holds at most
// somaxconn (4096 since Linux 5.4) connections anyway.
const maxDrain = 4096

// drainBacklog accepts and closes, unread, the connections waiting in l's
// listen backlog, without blocking, and returns how many. Closing a socket
// with unread data sends a reset (RFC 2525 §2.17), which is what a client
// over the rate limit gets. It goes below net.Listener, whose Accept would
// park the goroutine (and wake it, a context switch) for every connection.
func drainBacklog(l net.Listener) int {
	sc, ok := l.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	// A listener's RawConn supports only Control, which runs f on the
	// descriptor, non-blocking as net sets it up: an empty backlog ends
	// the loop with EAGAIN instead of a wait. Any error other than EINTR
	// and ECONNABORTED is left for the next Accept to report.
	rc.Control(func(fd uintptr) {
		for n < maxDrain {
			nfd, _, err := syscall.Accept4(int(fd), syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK)
			if err == syscall.EINTR || err == syscall.ECONNABORTED {
				continue
			}
			if err != nil {
				return
			}
			syscall.Close(nfd)
			n++
		}
	})
	return n
}
