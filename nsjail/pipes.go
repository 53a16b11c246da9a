package nsjail

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pipes are the init's stdio, its control and status pipes, the files
// pipe, and with a proxy a unix socket pair.
type pipes struct {
	inR, inW       *os.File
	outR, outW     *os.File
	errR, errW     *os.File
	ctlR, ctlW     *os.File
	stR, stW       *os.File
	filesR, filesW *os.File
	// proxyR, proxyW are a unix socket pair, only with a proxy.
	proxyR, proxyW *os.File
	// sessR, sessW are a SOCK_SEQPACKET pair, only for a session
	// (Spec.Session): sessW becomes the payload's fd 3.
	sessR, sessW *os.File
}

func (p *pipes) open(withStdin, withProxy, withSession bool) error {
	var err error
	if withSession {
		// SEQPACKET keeps each message whole (unix(7)): a write the
		// driver did not frame cannot run into the next one.
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socketpair(AF_UNIX, SOCK_SEQPACKET) for the session: %w", err)
		}
		p.sessR, p.sessW = os.NewFile(uintptr(fds[0]), "session"), os.NewFile(uintptr(fds[1]), "session")
	}
	if withProxy {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socketpair for the proxy: %w", err)
		}
		p.proxyR, p.proxyW = os.NewFile(uintptr(fds[0]), "proxy"), os.NewFile(uintptr(fds[1]), "proxy")
	}
	if withStdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			return fmt.Errorf("pipe for stdin: %w", err)
		}
	} else if p.inR, err = os.Open(os.DevNull); err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	for _, pp := range []struct {
		r, w **os.File
		what string
	}{{&p.outR, &p.outW, "stdout"}, {&p.errR, &p.errW, "stderr"}, {&p.ctlR, &p.ctlW, "control"}, {&p.stR, &p.stW, "status"}, {&p.filesR, &p.filesW, "files"}} {
		if *pp.r, *pp.w, err = os.Pipe(); err != nil {
			return fmt.Errorf("pipe for %s: %w", pp.what, err)
		}
	}
	return nil
}

// closeChildEnds closes the supervisor's copies of the init's ends, so
// that EOF on a pipe means every process in the sandbox is done with it.
func (p *pipes) closeChildEnds() {
	for _, f := range []**os.File{&p.inR, &p.outW, &p.errW, &p.ctlR, &p.stW, &p.filesW, &p.proxyW, &p.sessW} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (p *pipes) closeAll() {
	p.closeChildEnds()
	for _, f := range []**os.File{&p.inW, &p.outR, &p.errR, &p.ctlW, &p.stR, &p.filesR, &p.proxyR, &p.sessR} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}
