package nsjail

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// reportReader reads the Python runner's report while the payload runs:
// the figures a script leaves (Payload.FigureBytes) can be larger than a
// socket's buffer, so the runner's sendall would wait forever for an init
// that reads only after the reap. It runs on a goroutine of its own, on
// one of the init's unlocked threads (as readControl), and keeps what the
// first maxReportConns connections sent, within maxReportTotal bytes
// together: what the payload sends there itself costs it its own report,
// never the init's memory.
type reportReader struct {
	listener int
	stop     int // an eventfd: the payload is gone
	done     chan struct{}
	conns    [][]byte // each connection's bytes, in accept order
}

const (
	// maxReportConns: the runner connects once; the payload may connect
	// too (the abstract address is listed in /proc/net/unix), and does
	// not hide the runner's report by connecting first.
	maxReportConns = 4
	// maxReportTotal bounds all connections' bytes together: the error
	// (at most 60000 bytes), and the figures' budget with their records'
	// headers.
	maxReportTotal = maxReport + MaxFigureBytes + (maxFigures+1)*5
)

// startReportReader reads the connections to listener (non-blocking)
// until stopAndTake.
func startReportReader(listener int) (*reportReader, error) {
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd(0, EFD_CLOEXEC) (the report reader's stop): %w", err)
	}
	r := &reportReader{listener: listener, stop: stop, done: make(chan struct{})}
	go r.loop()
	return r, nil
}

// loop polls the listener, the open connections and the stop; after the
// stop (every process but the init is gone: nothing can write any more)
// it takes what is still queued without waiting.
func (r *reportReader) loop() {
	defer close(r.done)
	var open []int // fds, each with its index in conns
	var index []int
	total := 0
	stopped := false
	closeConn := func(i int) {
		unix.Close(open[i])
		open = append(open[:i], open[i+1:]...)
		index = append(index[:i], index[i+1:]...)
	}
	buf := make([]byte, 64<<10)
	for {
		fds := []unix.PollFd{{Fd: int32(r.listener), Events: unix.POLLIN}, {Fd: int32(r.stop), Events: unix.POLLIN}}
		for _, fd := range open {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		timeout := -1
		if stopped {
			// Once stopped: what is queued, then out (poll(2) skips a
			// negative fd, so the eventfd, readable for good, is not
			// polled again).
			fds[1].Fd, timeout = -1, 0
		}
		n, err := unix.Poll(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || (stopped && n == 0) {
			break
		}
		if !stopped && fds[1].Revents != 0 {
			stopped = true
		}
		for i := len(open) - 1; i >= 0; i-- {
			if fds[2+i].Revents == 0 && !stopped {
				continue
			}
			for {
				k, err := unix.Read(open[i], buf)
				if k > 0 {
					if total+k > maxReportTotal {
						// Past the budget: this connection's report is
						// cut, so it is dropped whole.
						r.conns[index[i]] = nil
						closeConn(i)
						break
					}
					total += k
					r.conns[index[i]] = append(r.conns[index[i]], buf[:k]...)
					continue
				}
				if errors.Is(err, unix.EAGAIN) && !stopped {
					break
				}
				// EOF, an error, or nothing more once all writers are gone.
				closeConn(i)
				break
			}
		}
		if fds[0].Revents != 0 && len(r.conns) < maxReportConns {
			fd, _, err := unix.Accept4(r.listener, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if err == nil {
				r.conns = append(r.conns, []byte{})
				open = append(open, fd)
				index = append(index, len(r.conns)-1)
			}
		} else if fds[0].Revents != 0 {
			// No more than maxReportConns: the rest are refused unread.
			if fd, _, err := unix.Accept4(r.listener, unix.SOCK_CLOEXEC); err == nil {
				unix.Close(fd)
			}
		}
	}
	for _, fd := range open {
		unix.Close(fd)
	}
	unix.Close(r.listener)
}

// stopAndTake ends the reader once the payload and every process of
// the sandbox are gone, and returns each connection's bytes.
func (r *reportReader) stopAndTake() [][]byte {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(r.stop, one[:])
	<-r.done
	unix.Close(r.stop)
	return r.conns
}
