package initbin

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// The memfd's copy of an `sbx exec`, started before Go's runtime (issue
// 13). A C constructor (ctorcopy_cgo.go, in a cgo build that embeds
// sbx-init) opens /proc/self/exe, makes the memfd and a pipe, and clones
// a small process, with no mm shared, that waits on the pipe. This
// package's init (early.go) computes where the image lies in the file
// (selfcopy.go) and writes that to the pipe; the process sendfile(2)s the
// range into the memfd, beside the rest of the package inits and the CLI,
// on the other CPU, and exits. Get (makeMemfd) reaps it by its pid, then
// checks, seals and raises the memfd as the copy from Go does. Any
// failure on the way, the constructor's included, falls back to the copy
// from Go, and the timeline says why (Exe.EarlyWhy).

// ctorCopy is the state the constructor left: its fds (-1 when closed)
// and the copy process.
type ctorCopy struct {
	ran                 bool // argv was `sbx exec ...`: the constructor tried
	exe, memfd, req     int
	pid                 int   // the copy process, 0 once reaped or never made
	err                 error // why the constructor made no copy process
	requested, finished bool
}

// early is this process's constructor copy, read by early.go's init.
var early ctorCopy

// request sends the copy process the image's offset in /proc/self/exe
// and its length, and closes the pipe. On an error the copy is given up
// (release), and the caller copies from Go.
func (c *ctorCopy) request(img []byte) error {
	if c.err != nil {
		return c.err
	}
	off, err := imageOffset(c.exe, img)
	if err != nil {
		c.release()
		return err
	}
	var req [16]byte
	binary.NativeEndian.PutUint64(req[0:], uint64(off))
	binary.NativeEndian.PutUint64(req[8:], uint64(len(img)))
	n, err := unix.Write(c.req, req[:])
	for err == unix.EINTR {
		n, err = unix.Write(c.req, req[:])
	}
	unix.Close(c.req)
	c.req = -1
	if err == nil && n != len(req) {
		err = fmt.Errorf("%d of %d bytes written", n, len(req))
	}
	if err != nil {
		c.release()
		return fmt.Errorf("write the copy request (offset %d, %d bytes) to the copy process (pid %d): %w", off, len(img), c.pid, err)
	}
	c.requested = true
	return nil
}

// finish reaps the copy process and makes its memfd what sealedMemfd
// makes: the image checked (selfCopyCheck), sealed, raised to fdFloor or
// above. On an error every fd of the copy is closed.
func (c *ctorCopy) finish(img []byte) (Memfd, error) {
	pid := c.pid
	status, err := c.reap()
	unix.Close(c.exe)
	c.exe = -1
	fd := c.memfd
	c.memfd = -1
	if err == nil {
		err = copyStatus(status, pid, len(img))
	}
	if err == nil {
		err = selfCopyCheck(fd, img)
	}
	if err != nil {
		unix.Close(fd)
		return Memfd{FD: -1}, err
	}
	high, err := sealHigh(fd)
	if err != nil {
		return Memfd{FD: -1}, err
	}
	return Memfd{FD: high, Path: fmt.Sprintf("/proc/self/fd/%d", high), Copy: CopySendfile}, nil
}

// reap waits for the copy process by its pid: wait4(2) with __WCLONE, as
// it has no exit signal (ctorcopy_cgo.go), never wait4(-1). Its pid
// cannot be another's until it is reaped here.
func (c *ctorCopy) reap() (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	if c.pid <= 0 {
		return ws, fmt.Errorf("no copy process")
	}
	for {
		_, err := unix.Wait4(c.pid, &ws, unix.WCLONE, nil)
		if err == unix.EINTR {
			continue
		}
		pid := c.pid
		c.pid = 0
		if err != nil {
			return ws, fmt.Errorf("wait4(%d, __WCLONE) for the copy process: %w", pid, err)
		}
		return ws, nil
	}
}

// release gives the copy up: the process is killed (it is ours and
// unreaped, so the pid is its) and reaped, and every fd closed.
func (c *ctorCopy) release() {
	if c.pid > 0 {
		unix.Kill(c.pid, unix.SIGKILL)
		c.reap()
	}
	for _, fd := range []*int{&c.req, &c.exe, &c.memfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// copyStatus is the copy process's wait status as an error, nil for exit
// 0 (ctorcopy_cgo.go's statuses).
func copyStatus(ws unix.WaitStatus, pid, n int) error {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return nil
	case ws.Exited() && ws.ExitStatus() == copyNoReq:
		return fmt.Errorf("the copy process (pid %d) read no request", pid)
	case ws.Exited() && ws.ExitStatus() == copyEOF:
		return fmt.Errorf("sendfile(memfd, /proc/self/exe, %d bytes) in the copy process (pid %d): end of file", n, pid)
	case ws.Exited() && ws.ExitStatus() == copyOrphan:
		return fmt.Errorf("the copy process (pid %d) found its parent gone", pid)
	case ws.Exited() && ws.ExitStatus() <= copyErrnoMax:
		return fmt.Errorf("sendfile(memfd, /proc/self/exe, %d bytes) in the copy process (pid %d): %w", n, pid, unix.Errno(ws.ExitStatus()))
	case ws.Signaled():
		return fmt.Errorf("the copy process (pid %d) was killed by %v", pid, ws.Signal())
	}
	return fmt.Errorf("the copy process (pid %d) ended with wait status %#x", pid, uint32(ws))
}
