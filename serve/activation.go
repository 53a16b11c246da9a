package serve

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// listenFDsStart is SD_LISTEN_FDS_START: the first fd a service manager
// passes (sd_listen_fds(3)).
const listenFDsStart = 3

// Activation is what a service manager said it passed in LISTEN_PID and
// LISTEN_FDS (sd_listen_fds(3)): N listening sockets from fd 3 on, meant
// for the process whose pid is LISTEN_PID (a child that inherited the
// variables is not meant).
type Activation struct {
	// FDs is LISTEN_FDS: how many sockets, from fd 3; 0 when none was
	// passed or they are meant for another process.
	FDs int
}

// ReadActivation reads LISTEN_PID and LISTEN_FDS for the process pid, as
// sd_listen_fds(3) does, without libsystemd. Neither set: no socket. A
// LISTEN_PID that is another process's: no socket (the variables leaked
// from a parent). Set but malformed: an error, since the service manager
// meant something sbx cannot tell.
func ReadActivation(getenv func(string) string, pid int) (Activation, error) {
	spid, sfds := getenv("LISTEN_PID"), getenv("LISTEN_FDS")
	if spid == "" && sfds == "" {
		return Activation{}, nil
	}
	p, err := strconv.Atoi(spid)
	if err != nil || p <= 0 {
		return Activation{}, fmt.Errorf("LISTEN_PID=%q: want the pid the sockets are meant for (sd_listen_fds(3))", spid)
	}
	if p != pid {
		return Activation{}, nil
	}
	n, err := strconv.Atoi(sfds)
	if err != nil || n < 0 {
		return Activation{}, fmt.Errorf("LISTEN_FDS=%q: want the number of sockets passed from fd 3 (sd_listen_fds(3))", sfds)
	}
	return Activation{FDs: n}, nil
}

// Inherited is the listening socket a service manager passed (systemd's
// socket activation, sbx.socket): exactly one, at fd 3. It takes the
// socket over as a net.Listener (a CLOEXEC duplicate: the original fd 3
// is closed, so no sandbox's init, which gets its own fd 3, can inherit
// it) and unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES, as
// sd_listen_fds(3) does with unset_environment, so no child sees them.
// tokens is Listen's: an inherited TCP socket that is not loopback
// without a token is refused too.
func Inherited(a Activation, tokens bool) (net.Listener, error) {
	if a.FDs != 1 {
		return nil, fmt.Errorf("LISTEN_FDS=%d: sbx serve takes exactly one socket (one ListenStream= in sbx.socket)", a.FDs)
	}
	ln, err := listenerFromFD(listenFDsStart)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(k)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tokens && !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("the inherited socket (LISTEN_FDS) listens on %s: not a loopback address, and no token: give --token-file FILE or SBX_TOKEN (anyone who can reach it could run code here)", tcp)
	}
	return ln, nil
}

// listenerFromFD checks that fd is a listening stream socket and makes it
// a net.Listener; fd itself is closed (net.FileListener keeps a dup).
func listenerFromFD(fd int) (net.Listener, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("getsockopt fd %d SO_TYPE (the socket LISTEN_FDS passed): %w", fd, err)
	}
	if typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("fd %d (LISTEN_FDS) is a socket of type %d, not SOCK_STREAM: use ListenStream=", fd, typ)
	}
	acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return nil, fmt.Errorf("getsockopt fd %d SO_ACCEPTCONN: %w", fd, err)
	}
	if acc == 0 {
		return nil, fmt.Errorf("fd %d (LISTEN_FDS) is not listening: sbx.socket must not say Accept=yes", fd)
	}
	f := os.NewFile(uintptr(fd), "LISTEN_FDS")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("fd %d (LISTEN_FDS): %w", fd, err)
	}
	return ln, nil
}
