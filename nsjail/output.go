package nsjail

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// capture keeps the head and the tail of a stream within limit bytes and
// counts everything that went through it. Tracebacks live at the tail, so
// both ends are worth keeping; the middle is dropped and replaced by an
// explicit marker in String.
type capture struct {
	mu    sync.Mutex
	limit int64
	head  []byte
	tail  []byte // ring buffer of the last len(tail) bytes, once full
	pos   int    // next write position in tail
	full  bool   // tail has wrapped
	total int64
	// live, when set, gets every byte as it arrives (terminal mode).
	live io.Writer
	// onOverflow, when set, is called once the stream passes limit.
	onOverflow func()
	// liveCut: live output stopped at the head; Finish owes the rest.
	// liveShown counts the bytes written live.
	liveCut   bool
	liveShown int64
}

// Finish completes the live copy of a truncated stream with the marker
// and the tail, as the Result has them. Bytes already shown live beyond
// the head (before the stream passed the limit) are not shown again.
func (c *capture) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil || !c.liveCut {
		return
	}
	var tail []byte
	if c.full {
		tail = append(append(tail, c.tail[c.pos:]...), c.tail[:c.pos]...)
	} else {
		tail = c.tail
	}
	// The tail holds bytes [total-len(tail), total): show what of it was
	// not shown live, after a marker for the bytes in between.
	tailStart := c.total - int64(len(tail))
	if dropped := tailStart - c.liveShown; dropped > 0 {
		c.live.Write([]byte(elisionMarker(dropped)))
	} else {
		tail = tail[-dropped:]
	}
	c.live.Write(tail)
}

func newCapture(limit int64, live io.Writer) *capture {
	if limit < 0 {
		limit = 0
	}
	return &capture{limit: limit, live: live}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	before := c.total
	c.total += int64(n)
	if c.total > c.limit && c.onOverflow != nil {
		c.onOverflow()
		c.onOverflow = nil
	}
	headCap := c.limit / 2
	if c.live != nil {
		// Live output is capped too: up to the limit everything passes as
		// it comes (interactive output keeps flowing); past it nothing
		// more, until Finish prints the marker and the tail. A terminal
		// sees at most one and a half times the limit.
		live := p
		if c.total > c.limit {
			live = nil
			if before < headCap {
				live = p[:headCap-before]
			}
			c.liveCut = true
		}
		c.liveShown += int64(len(live))
		// A closed terminal must not stop the capture or the run.
		if _, err := c.live.Write(live); err != nil {
			c.live = nil
		}
	}
	if room := headCap - int64(len(c.head)); room > 0 {
		k := int64(len(p))
		if k > room {
			k = room
		}
		c.head = appendDoubling(c.head, p[:k], headCap)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	tailCap := int(c.limit - headCap)
	if tailCap == 0 {
		return n, nil
	}
	if c.tail == nil {
		c.tail = make([]byte, 0, tailCap)
	}
	for len(p) > 0 {
		if !c.full {
			k := tailCap - len(c.tail)
			if k > len(p) {
				k = len(p)
			}
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			if len(c.tail) == tailCap {
				c.full = true
				c.pos = 0
			}
			continue
		}
		if len(p) >= tailCap {
			copy(c.tail, p[len(p)-tailCap:])
			c.pos = 0
			return n, nil
		}
		k := copy(c.tail[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % tailCap
	}
	return n, nil
}

// appendDoubling is append(b, p...) for the head, whose capacity doubles
// (from 4 KiB, up to limit) where append's grows by ~1.25 past 256 bytes
// (runtime.nextslicecap): a head filled by io.Copy's 32 KiB writes to
// strict's 512 KiB was reallocated 10 times, copying ~5 times its size
// in all, against 5 times and ~2 (issue 13).
func appendDoubling(b, p []byte, limit int64) []byte {
	if need := len(b) + len(p); need > cap(b) {
		n := min(max(int64(2*cap(b)), int64(need), 4<<10), max(limit, int64(need)))
		nb := make([]byte, len(b), n)
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}

// Truncated reports whether bytes were dropped.
func (c *capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > c.limit
}

// Total is the number of bytes the stream produced.
func (c *capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Bytes returns head, marker and tail; the marker appears only when bytes
// were dropped and names how many.
func (c *capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tail []byte
	if c.full {
		tail = append(append(tail, c.tail[c.pos:]...), c.tail[:c.pos]...)
	} else {
		tail = c.tail
	}
	out := append([]byte(nil), c.head...)
	if dropped := c.total - int64(len(c.head)) - int64(len(tail)); dropped > 0 {
		out = append(out, elisionMarker(dropped)...)
	}
	return append(out, tail...)
}

func elisionMarker(n int64) string {
	return fmt.Sprintf("\n[... %d bytes elided ...]\n", n)
}

// String is Bytes as valid UTF-8 (invalid sequences become U+FFFD). It
// builds the string in one allocation of the exact size, where
// string(Bytes()) made three copies of up to the output cap (the head, the
// slice grown by the tail, the string): for 1.4 MB of output ~4.5 ms of
// the supervisor's CPU and the GC cycles of that garbage (issue 13).
// Valid input is returned as it is: utf8.ValidString checks eight ASCII
// bytes at a time, where ToValidUTF8's own scan decodes rune by rune
// (~1 ms for 1.4 MB).
func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var marker string
	if dropped := c.total - int64(len(c.head)) - int64(len(c.tail)); dropped > 0 {
		marker = elisionMarker(dropped)
	}
	var b strings.Builder
	b.Grow(len(c.head) + len(marker) + len(c.tail))
	b.Write(c.head)
	b.WriteString(marker)
	if c.full {
		b.Write(c.tail[c.pos:])
		b.Write(c.tail[:c.pos])
	} else {
		b.Write(c.tail)
	}
	if out := b.String(); utf8.ValidString(out) {
		return out
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
