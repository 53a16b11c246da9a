package nsjail

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/netproxy"
)

// DNSStubIP is the DNS stub's address inside the sandbox: resolv.conf
// names it. It is the address systemd-resolved uses, on the sandbox's own
// loopback; the supervisor answers on it from the host side (issue 18).
const DNSStubIP = "127.0.0.53"

var dnsStubAddr = [4]byte{127, 0, 0, 53}

// EgressServer is what a ProxyServer also offers to serve the DNS stub and
// the transparent listeners (netproxy.Proxy does).
type EgressServer interface {
	ServeDNS(pc net.PacketConn) error
	ServeDNSTCP(l net.Listener) error
	ServeForward(l net.Listener, fw netproxy.Forward) error
	Forwards() []netproxy.Forward
	NoProxy() string
}

// maxFDsPerMsg stays under SCM_MAX_FD (253, net/unix/scm.c).
const maxFDsPerMsg = 200

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

// handOverEgress opens the DNS stub's UDP socket and TCP listener on
// DNSStubIP:53 and a TCP listener on every forward's reserved address and
// port, in the sandbox's network namespace, and passes them to the
// supervisor over the proxy's unix socket, ahead of the proxy's listener.
// Nothing inside the sandbox serves them: the supervisor does, from the
// host side. A port not forwarded has no listener, so a connection to it
// is refused by the sandbox's own kernel.
func (in *initProc) handOverEgress() error {
	if !in.spec.DNS {
		return nil
	}
	var fds []int
	defer func() { closeAll(fds) }()
	fd, err := bindInet(unix.SOCK_DGRAM, dnsStubAddr, 53)
	if err != nil {
		return err
	}
	fds = append(fds, fd)
	if fd, err = bindInet(unix.SOCK_STREAM, dnsStubAddr, 53); err != nil {
		return err
	}
	fds = append(fds, fd)
	for _, fw := range in.spec.Forwards {
		if !fw.Addr.Addr().Is4() {
			return fmt.Errorf("forward %s: not an IPv4 address", fw.Addr)
		}
		if fd, err = bindInet(unix.SOCK_STREAM, fw.Addr.Addr().As4(), int(fw.Addr.Port())); err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	for len(fds) > 0 {
		n := min(len(fds), maxFDsPerMsg)
		if err := unix.Sendmsg(proxyFD, []byte{'E'}, unix.UnixRights(fds[:n]...), nil, 0); err != nil {
			return fmt.Errorf("sendmsg SCM_RIGHTS (%d sockets): %w", n, err)
		}
		closeAll(fds[:n])
		fds = fds[n:]
	}
	return nil
}

// bindInet makes a socket of type typ bound to addr:port, listening when
// it is a stream socket.
func bindInet(typ int, addr [4]byte, port int) (int, error) {
	what := fmt.Sprintf("%d.%d.%d.%d:%d", addr[0], addr[1], addr[2], addr[3], port)
	kind := "SOCK_STREAM"
	if typ == unix.SOCK_DGRAM {
		kind = "SOCK_DGRAM"
	}
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket(AF_INET, %s): %w", kind, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %s %s: %w", kind, what, err)
	}
	if typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, 128); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("listen %s: %w", what, err)
		}
	}
	return fd, nil
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
	for i, f := range files[1:] {
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
