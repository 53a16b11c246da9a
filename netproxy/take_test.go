package netproxy

import (
	"net"
	"testing"
	"time"
)

// TestTake: each Take returns what ended since the last one, with that
// span's Summary; a connection still open stays in the log, in its place,
// for a later Take; and the log's count cap holds per span, so a proxy
// that lives for many spans (a session's cells) never runs out of log.
func TestTake(t *testing.T) {
	p, addr := startProxy(t, Config{Allow: []string{"ok.test"}})
	p.mu.Lock()
	p.maxAttempts = 3
	p.mu.Unlock()
	for i := 0; i < 2; i++ {
		exchange(t, addr, "GET http://no.test/ HTTP/1.1\r\nHost: no.test\r\n\r\n")
	}
	waitAttempts(t, p, 2)
	as, sum, _ := p.Take()
	if len(as) != 2 || sum.Attempts != 2 || sum.Recorded != 2 || sum.Refused != 2 || sum.Dropped != 0 || as[0].Host != "no.test" || as[0].Allowed {
		t.Fatalf("first span: %+v %+v", as, sum)
	}
	if as, sum, open := p.Take(); open != 0 || len(as) != 0 || sum.Attempts != 0 || sum.Refused != 0 {
		t.Errorf("an empty span: %+v %+v", as, sum)
	}

	// One connection left open over the span's end: it is Open, not in
	// this span's records, and its record comes with the next Take.
	open, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitActive(t, p, 1)
	for i := 0; i < 4; i++ { // one past the cap of 3, with the open slot
		exchange(t, addr, "GET http://no.test/"+string(rune('a'+i))+" HTTP/1.1\r\nHost: no.test\r\n\r\n")
	}
	deadline := time.Now().Add(5 * time.Second)
	for (p.AttemptsDropped() != 2 || p.Open() != 1) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if p.Open() != 1 {
		t.Errorf("Open() = %d, want 1", p.Open())
	}
	as, sum, n := p.Take()
	if n != 1 || len(as) != 2 || sum.Attempts != 5 || sum.Recorded != 2 || sum.Dropped != 2 {
		t.Errorf("second span (cap 3, one slot open): %d records, %+v; want 2 recorded, 2 dropped of 5", len(as), sum)
	}
	open.Close()
	waitActive(t, p, 0)
	for i := 0; i < 2; i++ {
		exchange(t, addr, "GET http://no.test/ HTTP/1.1\r\nHost: no.test\r\n\r\n")
	}
	waitAttempts(t, p, 3)
	as, sum, _ = p.Take()
	if len(as) != 3 || sum.Dropped != 0 || sum.Attempts != 2 || as[0].Method != "" || as[1].Host != "no.test" {
		t.Errorf("third span: the open connection's record first, then two: %+v %+v", as, sum)
	}
	p.mu.Lock()
	n, bytes := len(p.attempts), p.logBytes
	p.mu.Unlock()
	if n != 0 || bytes != 0 {
		t.Errorf("after the Takes the log holds %d slots, %d bytes; want none", n, bytes)
	}
}
