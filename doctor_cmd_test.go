package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What a consumer of --output-dir reads counts every name: a file with
// hard links counts once per link.
func TestBytesToReadCountsEachName(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"l1", "sub/l2"} {
		if err := os.Link(filepath.Join(dir, "big"), filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("big", filepath.Join(dir, "sym")) // not a regular file: not read
	if n := bytesToRead(dir); n != 3000 {
		t.Errorf("bytesToRead = %d, want 3000", n)
	}
}

func TestLineSignal(t *testing.T) {
	l := newLineSignal()
	l.Write([]byte(`{"held": `))
	select {
	case <-l.ch:
		t.Fatal("closed before a newline")
	default:
	}
	l.Write([]byte("128}\n"))
	l.Write([]byte("more\n")) // a second line must not close twice
	select {
	case <-l.ch:
	case <-time.After(time.Second):
		t.Fatal("not closed at the newline")
	}
}

func TestAcceptedAny(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := acceptedAny(ln.(*net.TCPListener)); got != "no connection" {
		t.Errorf("nothing connected: %q", got)
	}
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// On loopback the listener may queue the connection a moment after
	// Dial returns (the handshake's last ACK can be handled in softirq
	// context later); in doctor the run is long over by then.
	got := acceptedAny(ln.(*net.TCPListener))
	for deadline := time.Now().Add(5 * time.Second); got == "no connection" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		got = acceptedAny(ln.(*net.TCPListener))
	}
	if want := "a connection from " + c.LocalAddr().String(); got != want {
		t.Errorf("a connection was made, acceptedAny says %q, want %q", got, want)
	}
	if got := acceptedAny(ln.(*net.TCPListener)); got != "no connection" {
		t.Errorf("the one connection was taken, acceptedAny says %q", got)
	}
}
