//go:build !sbx_init_only

package nsjail

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// The supervisor's side of egress: it asks the init for the DNS stub's and
// the forwards' sockets (init_egress_linux.go makes them) and serves them.
// The init binary leaves it out (proxy_serve_linux.go says why).

// EgressServer is what a ProxyServer also offers to serve the DNS stub and
// the transparent listeners (netproxy.Proxy does).
type EgressServer interface {
	ServeDNS(pc net.PacketConn) error
	ServeDNSTCP(l net.Listener) error
	ServeForward(l net.Listener, fw Forward) error
	ServeRefusedSYNs(f *os.File) error
	Forwards() []Forward
	NoProxy() string
}

// prepareEgress asks the init for the stub's and the forwards' sockets
// when the proxy can serve them.
func prepareEgress(job *Job) {
	es, ok := job.Proxy.(EgressServer)
	if !ok {
		return
	}
	job.Spec.DNS = true
	job.Spec.Forwards = es.Forwards()
}

// noProxyFor is NO_PROXY for the run: the sandbox's own services, minus
// the loopback targets the allowlist names (netproxy.Proxy.NoProxy).
func noProxyFor(p ProxyServer) string {
	if es, ok := p.(EgressServer); ok {
		return es.NoProxy()
	}
	return "localhost,127.0.0.1,::1"
}

// serveEgress receives the sockets handOverEgress sent and serves each on
// its own goroutine until the proxy is closed. It reports false when they
// did not all come (the init failed its step and says so).
func (s *supervisor) serveEgress(sock *os.File) bool {
	if !s.job.Spec.DNS {
		return true
	}
	es := s.job.Proxy.(EgressServer)
	want := 2 + len(s.job.Spec.Forwards)
	if len(s.job.Spec.Forwards) > 0 {
		want++ // openSYNWatch's socket, last
	}
	var files []*os.File
	for len(files) < want {
		fds, err := recvFDs(sock, min(want-len(files), maxFDsPerMsg))
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return false
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "egress socket"))
		}
	}
	defer func() {
		for _, f := range files {
			f.Close() // the net wrappers hold dups
		}
	}()
	pc, err := net.FilePacketConn(files[0])
	if err != nil {
		return false
	}
	go es.ServeDNS(pc)
	listeners := files[1 : 2+len(s.job.Spec.Forwards)]
	if len(s.job.Spec.Forwards) > 0 {
		// A non-blocking dup, so that os.NewFile puts it on the poller
		// and Close wakes the reader (os.NewFile, "kindNonBlock").
		fd, err := unix.FcntlInt(files[len(files)-1].Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return false
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return false
		}
		go es.ServeRefusedSYNs(os.NewFile(uintptr(fd), "syn watch"))
	}
	for i, f := range listeners {
		l, err := net.FileListener(f)
		if err != nil {
			return false
		}
		if i == 0 {
			go es.ServeDNSTCP(l)
		} else {
			go es.ServeForward(l, s.job.Spec.Forwards[i-1])
		}
	}
	return true
}

// recvFDs receives one message of up to n fds (SCM_RIGHTS).
func recvFDs(sock *os.File, n int) ([]int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*n))
	nr, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("recvmsg: %w", err)
	}
	if nr != 1 || oobn == 0 {
		return nil, fmt.Errorf("recvmsg: no sockets from the init")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("recvmsg: bad control message: %v", err)
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("recvmsg: bad SCM_RIGHTS: %v", err)
		}
		fds = append(fds, f...)
	}
	if len(fds) == 0 || len(fds) > n {
		closeAll(fds)
		return nil, fmt.Errorf("recvmsg: %d sockets, want 1 to %d", len(fds), n)
	}
	return fds, nil
}
