package nsjail

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"a.txt", true}, {"dir/sub/a.txt", true}, {".hidden", true}, {"a..b", true},
		{"", false}, {"/etc/passwd", false}, {"../x", false}, {"a/../../x", false}, {"a//b", false},
		{"./a", false}, {"a/.", false}, {"a/", false}, {"a\x00b", false}, {strings.Repeat("a", 5000), false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if err := CheckWorkspacePath(tc.path); (err == nil) != tc.ok {
				t.Errorf("CheckWorkspacePath(%q) = %v, want ok %v", tc.path, err, tc.ok)
			}
		})
	}
}

// A message longer than a frame goes as fragments of frameBody bytes,
// each a datagram of its own with the more flag on all but the last.
func TestSessionSendFragments(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("socketpair(AF_UNIX, SOCK_SEQPACKET): %v", err)
	}
	defer unix.Close(fds[1])
	ss := &Session{sock: os.NewFile(uintptr(fds[0]), "s"), fd: fds[0]}
	defer ss.sock.Close()
	body := bytes.Repeat([]byte("0123456789"), 13000) // 130000 bytes: 3 frames
	go func() {
		if err := ss.send(frameCell, 7, body); err != nil {
			t.Error(err)
		}
	}()
	var got []byte
	buf := make([]byte, maxFrame)
	for i := 0; ; i++ {
		n, err := unix.Read(fds[1], buf)
		if err != nil {
			t.Fatal(err)
		}
		if buf[0] != frameCell || binary.BigEndian.Uint32(buf[1:5]) != 7 || n > frameHeader+frameBody {
			t.Fatalf("frame %d: kind %q seq %d, %d bytes", i, buf[0], binary.BigEndian.Uint32(buf[1:5]), n)
		}
		got = append(got, buf[frameHeader:n]...)
		if buf[5] == 0 {
			if i != 2 {
				t.Errorf("%d frames, want 3", i+1)
			}
			break
		}
	}
	if !bytes.Equal(got, body) {
		t.Errorf("reassembled %d bytes, want the %d sent", len(got), len(body))
	}
}

// The reader keeps nothing of a cell that is not running, and caps what
// a running one gets.
func TestSessionDispatchCaps(t *testing.T) {
	ss := &Session{reqs: map[uint32]*fileReq{}, readyC: make(chan uint32, 8)}
	ss.dispatch(frameResult, 1, false, []byte(`{"text":"stale"}`)) // no cell: dropped
	c := &cell{seq: 2, stdout: newCapture(SessionOutputLimit, nil), stderr: newCapture(SessionOutputLimit, nil), done: make(chan cellDone, 1)}
	ss.cur = c
	ss.dispatch(frameResult, 1, false, []byte(`{"text":"other cell"}`))
	ss.dispatch(frameResult, 2, false, []byte(`{"text":"mine","is_main_result":true}`))
	chunk := bytes.Repeat([]byte("x"), frameBody)
	for i := 0; i < maxResultBytes/frameBody+10; i++ {
		ss.dispatch(frameResult, 2, true, chunk)
	}
	ss.dispatch(frameResult, 2, false, nil)
	for i := 0; i < 100; i++ {
		ss.dispatch(frameStdout, 2, false, chunk)
	}
	if len(c.results) != 1 || c.results[0].Text != "mine" || !c.resultsCut {
		t.Errorf("results %+v, cut %v: want only the running cell's, and the flood cut", c.results, c.resultsCut)
	}
	if c.stdout.Total() != 100*frameBody || len(c.stdout.Bytes()) > SessionOutputLimit+100 || c.logBytes > SessionOutputLimit {
		t.Errorf("stdout: %d counted, %d kept, %d in logs", c.stdout.Total(), len(c.stdout.Bytes()), c.logBytes)
	}
	ss.dispatch(frameReady, 1, false, nil)
	if !c.lost {
		t.Errorf("a kernel started during the cell, and it does not say state_lost")
	}
}
