package netproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// budget is one direction's byte cap, shared by every connection of the
// run. Callers reserve before they move bytes and refund what they did not
// move, so the total never exceeds the limit, even with many connections
// racing for the last bytes.
type budget struct {
	limit int64 // 0: unlimited
	used  atomic.Int64
	err   error
}

func newBudget(dir string, limit int64) *budget {
	return &budget{limit: limit, err: &capError{Dir: dir, Limit: limit}}
}

// capError is the error of a connection cut because the run's total byte
// cap in one direction was reached.
type capError struct {
	Dir   string // "upload" (towards destinations) or "download"
	Limit int64
}

func (e *capError) Error() string {
	return fmt.Sprintf("%s cap of %d bytes reached", e.Dir, e.Limit)
}

// take reserves up to n bytes and returns how many it got; zero comes with
// the cap error.
func (b *budget) take(n int) (int, error) {
	if b.limit == 0 {
		return n, nil
	}
	for {
		used := b.used.Load()
		left := b.limit - used
		if left <= 0 {
			return 0, b.err
		}
		k := int64(n)
		if k > left {
			k = left
		}
		if b.used.CompareAndSwap(used, used+k) {
			return int(k), nil
		}
	}
}

func (b *budget) give(n int) {
	if b.limit != 0 && n > 0 {
		b.used.Add(-int64(n))
	}
}

func (b *budget) exhausted() bool { return b.limit != 0 && b.used.Load() >= b.limit }

var (
	errHeaderTimeout  = errors.New("header timeout")
	errHeaderTooLarge = errors.New("header too large")
)

// idleError is the error of a connection cut after moving no byte in either
// direction for the idle timeout.
type idleError struct{ After time.Duration }

func (e *idleError) Error() string { return fmt.Sprintf("idle for %v", e.After) }

// clock is the activity clock of one session: the moment any byte last moved
// on it, in either direction, and (during the header phase) a fixed
// deadline. Times are durations since start, so they are monotonic.
type clock struct {
	start time.Time
	idle  time.Duration
	last  atomic.Int64 // ns since start of the last byte moved
	hard  atomic.Int64 // ns since start of the header deadline; 0 once headers are in
}

func (c *clock) now() int64 { return int64(time.Since(c.start)) }
func (c *clock) touch()     { c.last.Store(c.now()) }

func (c *clock) deadline() time.Time {
	if h := c.hard.Load(); h != 0 {
		return c.start.Add(time.Duration(h))
	}
	return c.start.Add(time.Duration(c.last.Load()) + c.idle)
}

// expired returns the error that ends the session when its deadline passed,
// or nil when activity on the other side moved the deadline on.
func (c *clock) expired() error {
	now := c.now()
	if h := c.hard.Load(); h != 0 {
		if now >= h {
			return errHeaderTimeout
		}
		return nil
	}
	if now-c.last.Load() >= int64(c.idle) {
		return &idleError{c.idle}
	}
	return nil
}

// endHeader leaves the header phase: from now on only the idle timeout applies.
func (c *clock) endHeader() {
	c.touch()
	c.hard.Store(0)
}

// meter wraps one side of a session. Every call runs under the session's
// deadline, so a connection that is silent in both directions for the idle
// timeout fails even while one side sits in a blocked Read. On the upstream
// side it also draws on the run's byte budgets and counts the session's
// bytes. Embedding net.Conn (an interface) hides TCPConn.ReadFrom, so
// io.Copy always goes through these methods.
type meter struct {
	net.Conn
	side   string // "client" or "destination", for errors
	clk    *clock
	rd, wr *budget       // nil on the client side
	nr, nw *atomic.Int64 // byte counters, nil on the client side
	werr   error         // the last Write error, for the one goroutine that writes
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (m *meter) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	k := len(p)
	if m.rd != nil {
		var err error
		if k, err = m.rd.take(k); err != nil {
			return 0, err
		}
	}
	for {
		m.Conn.SetReadDeadline(m.clk.deadline())
		n, err := m.Conn.Read(p[:k])
		if n > 0 {
			m.clk.touch()
			err = nil // progress; a timeout is for the next call to find
		} else if err != nil && isTimeout(err) {
			if e := m.clk.expired(); e == nil {
				continue
			} else {
				err = e
			}
		}
		if m.rd != nil {
			m.rd.give(k - n)
			m.nr.Add(int64(n))
		}
		return n, m.wrap(err)
	}
}

// sideError is a network error from one side of a session.
type sideError struct {
	Side string // "client" or "destination"
	Err  error
}

func (e *sideError) Error() string { return e.Side + ": " + e.Err.Error() }
func (e *sideError) Unwrap() error { return e.Err }

// wrap names the side of a network error; EOF and the proxy's own
// verdicts (caps, timeouts) pass unchanged.
func (m *meter) wrap(err error) error {
	var ce *capError
	var ie *idleError
	switch {
	case err == nil, err == io.EOF, err == errHeaderTimeout, errors.As(err, &ce), errors.As(err, &ie):
		return err
	}
	return &sideError{Side: m.side, Err: err}
}

func (m *meter) Write(p []byte) (int, error) {
	k, capErr := len(p), error(nil)
	if m.wr != nil {
		if k, capErr = m.wr.take(len(p)); k == 0 {
			m.werr = capErr
			return 0, capErr
		}
		if k < len(p) {
			capErr = m.wr.err // write what the cap leaves, then fail
		}
	}
	done := 0
	for done < k {
		m.Conn.SetWriteDeadline(m.clk.deadline())
		n, err := m.Conn.Write(p[done:k])
		done += n
		if n > 0 {
			m.clk.touch()
		}
		if err != nil {
			if isTimeout(err) {
				if e := m.clk.expired(); e == nil {
					continue
				} else {
					err = e
				}
			}
			capErr = err
			break
		}
	}
	if m.wr != nil {
		m.wr.give(k - done)
		m.nw.Add(int64(done))
	}
	if capErr != nil {
		m.werr = capErr
	}
	return done, m.wrap(capErr)
}

// headerLimit caps how much a header phase may read; lift it once the header
// is parsed. Whether it was hit is a flag, not an error value, because
// textproto and bufio may pass the error on or hold it for later.
type headerLimit struct {
	r   io.Reader
	n   int64
	hit bool
}

func (h *headerLimit) Read(p []byte) (int, error) {
	if h.n <= 0 {
		h.hit = true
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= int64(n)
	return n, err
}

func (h *headerLimit) lift() { h.n = 1<<63 - 1 }
