package nsjail

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// listenAbstract is listenReport's socket, on a name of the test's.
func listenAbstract(t *testing.T) (int, string) {
	t.Helper()
	name := fmt.Sprintf("sbx-report-test-%d-%s", os.Getpid(), t.Name())
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: "@" + name}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		t.Fatal(err)
	}
	return fd, name
}

// The reader takes a report larger than any socket buffer while its
// writer is still sending (the runner's sendall would otherwise wait
// forever), keeps the connections apart and in order, and drops one
// past the budget whole.
func TestReportReader(t *testing.T) {
	fd, name := listenAbstract(t)
	r, err := startReportReader(fd)
	if err != nil {
		t.Fatal(err)
	}
	send := func(b []byte, cut bool) {
		c, err := net.Dial("unix", "@"+name)
		if err != nil {
			t.Fatal(err)
		}
		// Past the budget the reader closes its end: EPIPE.
		if _, err := c.Write(b); (err != nil) != cut {
			t.Fatalf("write %d bytes: %v", len(b), err)
		}
		c.Close()
	}
	small := []byte("first")
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16) // 4 MiB
	send(small, false)
	send(big, false) // returns only once the reader has taken most of it
	send(bytes.Repeat([]byte("x"), maxReportTotal), true)
	conns := r.stopAndTake()
	if len(conns) != 3 || !bytes.Equal(conns[0], small) || !bytes.Equal(conns[1], big) || conns[2] != nil {
		lens := []int{}
		for _, c := range conns {
			lens = append(lens, len(c))
		}
		t.Errorf("connections of %v bytes; want 5, %d, and the one past the budget dropped", lens, len(big))
	}
}
