//go:build integration

package tests

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// nsGetOwnerUID is NS_GET_OWNER_UID, _IO(0xb7, 0x4) (ioctl_ns(2), Linux
// 4.11; x/sys/unix does not carry it).
const nsGetOwnerUID = 0xb704

// userNSOwner is the host uid that owns the user namespace of pid.
func userNSOwner(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var uid uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 {
		return 0, fmt.Errorf("ioctl NS_GET_OWNER_UID /proc/%d/ns/user: %w", pid, e)
	}
	return int(uid), nil
}

// realUID is the first (real) uid of /proc/PID/status.
func realUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no Uid line", pid)
}

// holding is an sbx exec whose payload printed its first line and holds
// whatever it took until stop.
type holding struct {
	cmd  *exec.Cmd
	line string
	se   *lockedBuffer
	// sbx is the pid of sbx itself: cmd's, or under make vmtest's
	// SBX_TEST_WRAP the wrapper's child (sbxProcess). Signals go to it,
	// as a wrapper need not forward them.
	sbx int
}

// launchHolding starts `sbx exec args...` (startHeld) without waiting:
// the channel gets the outcome of reading the payload's first line into
// h.line, so that several sandboxes can start together.
func launchHolding(t *testing.T, r runner, args ...string) (*holding, <-chan error) {
	t.Helper()
	cmd, stdout, se := startHeld(t, r, args...)
	h := &holding{cmd: cmd, se: se}
	got := make(chan error, 1)
	go func() {
		var err error
		h.line, err = readLine(stdout)
		got <- err
		io.Copy(io.Discard, stdout)
	}()
	return h, got
}

// startHolding starts `sbx exec args...` and waits for the payload's first
// line.
func startHolding(t *testing.T, r runner, args ...string) *holding {
	t.Helper()
	h, got := launchHolding(t, r, args...)
	var err error
	select {
	case err = <-got:
	case <-time.After(2 * time.Minute):
		err = errors.New("no line within 2 minutes")
	}
	if err != nil {
		h.stop()
		t.Fatalf("sbx exec %v: payload's first line %q: %v; sbx stderr: %s", args, h.line, err, h.se.String())
	}
	h.sbx = sbxProcess(t, h.cmd.Process.Pid)
	return h
}

// stop ends the run: SIGTERM reaches the payload (sbx forwards it) and
// sbx cleans up; SIGKILL only if that did not happen.
func (h *holding) stop() {
	if h.sbx != 0 {
		syscall.Kill(h.sbx, syscall.SIGTERM)
	} else {
		h.cmd.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.cmd.Process.Kill()
		<-done
	}
}

// TestUserNSOwnedByRunUID: started by root, the sandbox's user namespace
// is owned by the run's own host uid (the one its processes run as), not
// by host root, so the kernel charges the sandbox's per-user-namespace
// counts to that uid (kernel/ucount.c). Started by uid 65534, it is
// owned by 65534, as before.
func TestUserNSOwnedByRunUID(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		m := marker(t)
		defer killMarked(m)
		h := startHolding(t, r, data("sleeper.py"), m)
		defer h.stop()
		// The marker is in sbx's argv too: the payload is the one in
		// another pid namespace.
		self, _ := os.Readlink("/proc/self/ns/pid")
		var payloads []int
		for _, pid := range processesWith(m) {
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && ns != self {
				payloads = append(payloads, pid)
			}
		}
		inits := initsOf(h.sbx)
		if len(payloads) == 0 || len(inits) != 1 {
			t.Fatalf("payload pids %v, init pids %v: want the payload and one init", payloads, inits)
		}
		hostUID, err := realUID(payloads[0])
		if err != nil {
			t.Fatal(err)
		}
		want := r.uid
		if r.uid == 0 {
			want = hostUID
			if hostUID < nsjail.RootHostIDBase || hostUID > nsjail.RootHostIDBase+0xffff {
				t.Fatalf("the payload runs as host uid %d, want one of %#x + 16 bits", hostUID, nsjail.RootHostIDBase)
			}
		}
		for _, pid := range append(inits, payloads...) {
			owner, err := userNSOwner(pid)
			if err != nil {
				t.Fatal(err)
			}
			if owner != want {
				t.Errorf("pid %d: its user namespace is owned by host uid %d, want %d (sbx run as %s; the payload is host uid %d)", pid, owner, want, r.name, hostUID)
			}
		}
	})
}

// TestRootSandboxesLeaveRootInotify: enough root-run sandboxes to hold
// more inotify instances than one user may have (16 each, against
// fs.inotify.max_user_instances, 128 by default) leave host root its own:
// each sandbox gets its 16 and a root process on the host can still make
// one. Before, the sandboxes' namespaces were owned by root and their
// instances were charged to root's quota: the ninth got none and host
// root (systemd, udev, journald) got EMFILE for the runs' lifetime. As
// uid 65534 the charge is that user's own quota by design (the sandbox
// cannot own its namespace as another user), which
// TestHostQuotasSurviveSandbox bounds.
func TestRootSandboxesLeaveRootInotify(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the quota at stake is host root's")
	}
	r := runner{"root", 0}
	requireUserNS(t, r)
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	const each = 16 // nsjail/quotas.go
	n := max/each + 1
	if n > 16 {
		t.Skipf("fs.inotify.max_user_instances is %d: draining it takes %d sandboxes, too many for this machine", max, n)
	}
	hs := make([]*holding, n)
	defer func() {
		for _, h := range hs {
			if h != nil {
				h.stop()
			}
		}
	}()
	got := make([]<-chan error, n)
	for i := range hs {
		hs[i], got[i] = launchHolding(t, r, data("drain_quotas.py"))
	}
	timeout := time.After(3 * time.Minute)
	for i := range hs {
		select {
		case <-got[i]:
		case <-timeout:
			t.Fatal("the sandboxes did not all start within 3 minutes")
		}
	}
	// Host root, outside any sandbox, while all of them hold theirs.
	fd, ierr := unix.InotifyInit1(unix.IN_CLOEXEC)
	if ierr == nil {
		unix.Close(fd)
	}
	for i, h := range hs {
		var inotify, signals int
		if _, err := fmt.Sscanf(h.line, "ready %d %d", &inotify, &signals); err != nil {
			t.Fatalf("sandbox %d: payload printed %q (%v); sbx stderr %s", i, h.line, err, h.se.String())
		}
		if inotify != each {
			t.Errorf("sandbox %d of %d holds %d inotify instances, want %d: the sandboxes share a quota", i+1, n, inotify, each)
		}
	}
	if ierr != nil {
		t.Errorf("host root: inotify_init1: %v while %d root-run sandboxes hold %d instances each (max_user_instances %d)", ierr, n, each, max)
	}
}

// threadIDs lists, per thread of pid, its Uid and Gid lines of status
// (real, effective, saved, filesystem).
func threadIDs(pid int) (map[string]string, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		var uid, gid string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" {
				uid = strings.Join(f[1:], " ")
			} else if len(f) == 5 && f[0] == "Gid:" {
				gid = strings.Join(f[1:], " ")
			}
		}
		ids[task.Name()] = "uid " + uid + ", gid " + gid
	}
	return ids, nil
}

// TestServeThreadsKeepServerIDs: the thread that took a run's uid to own
// its namespace ends with its sandbox and never returns to Go's pool, where
// any goroutine of the server (a cgroup write, an output file, the next
// sandbox's setup) could run with it. After a burst of runs, every thread
// of a root `sbx serve` is root again in all four ids (and every thread of
// one run as 65534 is 65534).
func TestServeThreadsKeepServerIDs(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		done := make(chan struct{}, 6)
		for range cap(done) {
			go func() {
				defer func() { done <- struct{}{} }()
				resp := s.do("POST", "/v1/exec", map[string]any{"code": "import time; time.sleep(0.2); print(1)"})
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("POST /v1/exec: %s", resp.Status)
				}
			}()
		}
		for range cap(done) {
			<-done
		}
		want := fmt.Sprintf("uid %[1]d %[1]d %[1]d %[1]d, gid %[1]d %[1]d %[1]d %[1]d", r.uid)
		// The thread ends just after the run's Result is out: give it
		// time on a loaded machine.
		var bad []string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ids, err := threadIDs(s.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			bad = bad[:0]
			for tid, got := range ids {
				if got != want {
					bad = append(bad, tid+": "+got)
				}
			}
			if len(bad) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(bad) != 0 {
			t.Errorf("threads of sbx serve with other ids than the server's (%s), 20 s after the runs: %v", want, bad)
		}
	})
}
