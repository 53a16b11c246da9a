package initbin

import (
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyStatus: every wait status of the constructor's copy process
// (ctorcopy_cgo.go) reads as what happened, and only exit 0 is success.
func TestCopyStatus(t *testing.T) {
	exited := func(code int) unix.WaitStatus { return unix.WaitStatus(code << 8) }
	for _, tc := range []struct {
		name string
		ws   unix.WaitStatus
		want string // "" for no error
	}{
		{"done", exited(0), ""},
		{"sendfile errno", exited(int(unix.EIO)), "sendfile(memfd, /proc/self/exe, 4096 bytes) in the copy process (pid 7): input/output error"},
		{"no request", exited(copyNoReq), "the copy process (pid 7) read no request"},
		{"end of file", exited(copyEOF), "sendfile(memfd, /proc/self/exe, 4096 bytes) in the copy process (pid 7): end of file"},
		{"orphan", exited(copyOrphan), "the copy process (pid 7) found its parent gone"},
		{"unknown status", exited(255), "the copy process (pid 7) ended with wait status 0xff00"},
		{"killed", unix.WaitStatus(unix.SIGKILL), "the copy process (pid 7) was killed by killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := copyStatus(tc.ws, 7, 4096)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("copyStatus(%#x) = %v, want nil", uint32(tc.ws), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("copyStatus(%#x) = %v, want %q", uint32(tc.ws), err, tc.want)
			}
		})
	}
}

// TestNoConstructorCopy: where no C constructor ran (this test binary is
// not `sbx exec`, or the build has no cgo or no image), the copy from Go
// is what runs, and giving the copy up touches no fd.
func TestNoConstructorCopy(t *testing.T) {
	c := constructorCopy()
	if c.ran || c.pid != 0 {
		t.Fatalf("constructorCopy() = %+v in a test binary, want nothing run", c)
	}
	c.release()
	if c.exe != -1 || c.memfd != -1 || c.req != -1 {
		t.Fatalf("after release: %+v, want every fd -1", c)
	}
}

// TestConstructorCopyFinishFailsClosed: a copy process that cannot be
// reaped as one (here an ordinary child, which wait4 with __WCLONE does
// not see) makes finish fail, with its memfd and exe fds closed, so that
// makeMemfd copies from Go instead; nothing half-made is sealed.
func TestConstructorCopyFinishFailsClosed(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	memfd, err := memfdCreate("sbx-init-test")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := ctorCopy{ran: true, exe: exe, memfd: memfd, req: -1, pid: cmd.Process.Pid, requested: true}
	m, err := c.finish([]byte("\x7fELF"))
	if err == nil || !strings.Contains(err.Error(), "__WCLONE") || m.FD != -1 {
		t.Fatalf("finish = %+v, %v; want an error naming the wait4", m, err)
	}
	for _, fd := range []int{memfd, exe} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("fd %d after a failed finish: %v, want EBADF (closed)", fd, err)
		}
	}
	if c.pid != 0 || c.exe != -1 || c.memfd != -1 {
		t.Errorf("after finish: %+v, want no pid and no fds", c)
	}
}
