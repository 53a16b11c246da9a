package nsjail

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// ProxyAddr is where the payload finds the network proxy: the sandbox's
// own loopback. HTTP_PROXY and friends point there.
const ProxyAddr = "127.0.0.1:3128"

// ProxyServer serves the sandbox's proxy connections on the host side
// (netproxy.Proxy). Close must stop it and everything it opened.
type ProxyServer interface {
	Serve(l net.Listener) error
	Close() error
}

// listenProxy opens the proxy's listening socket inside the sandbox's
// network namespace, on its loopback. Only the socket is made here: the
// supervisor accepts on it from the host side, so that every connection
// the payload makes to ProxyAddr is answered outside the sandbox, which
// has no other way out (no veth, no slirp, no root needed).
func listenProxy() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket(AF_INET, SOCK_STREAM): %w", err)
	}
	addr := &unix.SockaddrInet4{Port: 3128, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, addr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %s: %w", ProxyAddr, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen %s: %w", ProxyAddr, err)
	}
	return fd, nil
}

// sendFD passes fd over the unix socket sock (SCM_RIGHTS, unix(7)).
func sendFD(sock, fd int) error {
	if err := unix.Sendmsg(sock, []byte{'L'}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("sendmsg SCM_RIGHTS: %w", err)
	}
	return nil
}

// recvListener receives the proxy's listening socket from the init.
func recvListener(sock *os.File) (net.Listener, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("recvmsg: %w", err)
	}
	if n != 1 || oobn == 0 {
		return nil, fmt.Errorf("recvmsg: no listener from the init")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("recvmsg: bad control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("recvmsg: bad SCM_RIGHTS: %v", err)
	}
	f := os.NewFile(uintptr(fds[0]), "proxy listener")
	defer f.Close() // FileListener dups it
	return net.FileListener(f)
}
