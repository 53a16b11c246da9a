//go:build !sbx_init_only

package nsjail

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// The supervisor's half of the proxy: it serves, on the host, the
// listening socket the init made (proxy_linux.go). It is the only user of
// package net in nsjail, with egress_linux.go; the init binary (-tags
// sbx_init_only) leaves both out, so that it links no net (whose package
// init alone is ~90 KB of the image every sandbox copies into a memfd,
// issue 13) and has supervisor_initonly.go instead.

// ProxyServer serves the sandbox's proxy connections on the host side
// (netproxy.Proxy). Close must stop it and everything it opened.
type ProxyServer interface {
	Serve(l net.Listener) error
	Close() error
}

// serveProxy takes the listening socket from the init and serves it until
// the run ends (Job.Proxy.Close, deferred in run, stops it).
func (s *supervisor) serveProxy(sock *os.File) {
	// EOF (the init gone) ends a pending recvmsg: the init holds the
	// only other end.
	if !s.serveEgress(sock) {
		sock.Close()
		return
	}
	l, err := recvListener(sock)
	sock.Close()
	if err != nil {
		return // the init failed its step and says so on the status pipe
	}
	s.job.Proxy.Serve(l)
	l.Close()
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
