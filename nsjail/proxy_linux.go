package nsjail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProxyAddr is where the payload finds the network proxy: the sandbox's
// own loopback. HTTP_PROXY and friends point there.
const ProxyAddr = "127.0.0.1:3128"

// maxFDsPerMsg stays under SCM_MAX_FD (253, net/unix/scm.c).
const maxFDsPerMsg = 200

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
