package serve

import (
	"net"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadActivation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pid, fds string
		want     int
		err      string
	}{
		{name: "none"},
		{name: "ours", pid: "42", fds: "1", want: 1},
		{name: "two", pid: "42", fds: "2", want: 2},
		{name: "a parent's", pid: "41", fds: "1"},
		{name: "bad pid", pid: "x", fds: "1", err: "LISTEN_PID"},
		{name: "no pid", fds: "1", err: "LISTEN_PID"},
		{name: "bad count", pid: "42", fds: "-1", err: "LISTEN_FDS"},
		{name: "no count", pid: "42", err: "LISTEN_FDS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"LISTEN_PID": tc.pid, "LISTEN_FDS": tc.fds}
			a, err := ReadActivation(func(k string) string { return env[k] }, 42)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || a.FDs != tc.want {
				t.Fatalf("got %+v, %v; want %d fds", a, err, tc.want)
			}
		})
	}
}

func TestInheritedWantsOneSocket(t *testing.T) {
	for _, n := range []int{0, 2} {
		if _, err := Inherited(Activation{FDs: n}, false); err == nil || !strings.Contains(err.Error(), "exactly one") {
			t.Errorf("%d sockets: %v", n, err)
		}
	}
}

// listenerFromFD takes a listening TCP socket; it refuses a datagram
// socket and a stream socket that is not listening (Accept=yes gives a
// connection).
func TestListenerFromFD(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, _ := ln.(*net.TCPListener).File()
	got, err := listenerFromFD(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Addr().String() != ln.Addr().String() {
		t.Errorf("addr %s, want %s", got.Addr(), ln.Addr())
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err == nil {
		t.Errorf("the passed fd is still open")
	}
	udp, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if _, err := listenerFromFD(udp); err == nil || !strings.Contains(err.Error(), "SOCK_STREAM") {
		t.Errorf("a UDP socket: %v", err)
	}
	unix.Close(udp)
	idle, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if _, err := listenerFromFD(idle); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Errorf("a socket that does not listen: %v", err)
	}
	unix.Close(idle)
}
