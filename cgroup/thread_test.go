package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCgroups is /proc/PID/task/TID/cgroup parsed. It returns its
// error rather than calling t.Fatal: TestJoinThread calls it from a
// goroutine of its own (locked to a thread that is not the main one), where
// FailNow would end that goroutine only and leave the test waiting for
// its result until the -timeout.
func threadCgroups(pid, tid int) (procCgroup, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/cgroup", pid, tid))
	if err != nil {
		return procCgroup{}, err
	}
	return parseProcCgroup(b)
}

// TestJoinThread: JoinThread moves the calling thread alone into the
// Group in every hierarchy, a child it clones is born there, and
// LeaveThread puts the thread back where it was; LeaveThread on another
// thread refuses, wrapping ErrThreadInside.
func TestJoinThread(t *testing.T) {
	if want(t).mode != ModeV1 {
		t.Skipf("JoinThread is for cgroup v1 (mode here: %s); v2 uses CLONE_INTO_CGROUP", want(t).mode)
	}
	g := newTestGroup(t, Limits{Pids: 16})
	name := "/" + filepath.Base(g.Paths()[0])
	errc := make(chan error, 1)
	var run func()
	run = func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if unix.Gettid() == os.Getpid() {
			// Not the main thread: Go wedges it instead of ending it,
			// and it is the one to compare with.
			go run()
			select {}
		}
		errc <- func() error {
			tid := unix.Gettid()
			before, err := threadCgroups(os.Getpid(), tid)
			if err != nil {
				return err
			}
			m, err := g.JoinThread()
			if err != nil {
				return fmt.Errorf("JoinThread: %w", err)
			}
			in, err := threadCgroups(os.Getpid(), tid)
			if err != nil {
				return err
			}
			main, err := threadCgroups(os.Getpid(), os.Getpid())
			if err != nil {
				return err
			}
			for _, d := range g.dirs {
				c := d.controllers[0]
				if !strings.HasSuffix(in.v1Path[c], name) {
					return fmt.Errorf("after JoinThread the thread is in %s:%s, want %s", c, in.v1Path[c], name)
				}
				if main.v1Path[c] != before.v1Path[c] {
					return fmt.Errorf("JoinThread moved the main thread too: %s:%s", c, main.v1Path[c])
				}
			}
			out, err := exec.Command("/bin/cat", "/proc/self/cgroup").Output()
			if err != nil {
				return err
			}
			child, _ := parseProcCgroup(out)
			for _, d := range g.dirs {
				if c := d.controllers[0]; !strings.HasSuffix(child.v1Path[c], name) {
					return fmt.Errorf("a child cloned by the joined thread is in %s:%s, want %s", c, child.v1Path[c], name)
				}
			}
			other := make(chan error)
			go func() { other <- m.LeaveThread() }() // another thread, or this one unlocked: never
			if err := <-other; !errors.Is(err, ErrThreadInside) {
				return fmt.Errorf("LeaveThread on another thread = %v, want ErrThreadInside", err)
			}
			// A move back that fails (here: a tasks fd that is not open)
			// says the thread is still inside, and names the file; the
			// hierarchies that worked are left, the failed one is retried.
			d0 := g.dirs[0]
			fd := d0.homeTasksFD
			d0.homeTasksFD = -1
			err = m.LeaveThread()
			d0.homeTasksFD = fd
			if !errors.Is(err, ErrThreadInside) || !errors.Is(err, unix.EBADF) || !strings.Contains(err.Error(), filepath.Dir(d0.path)+"/tasks") {
				return fmt.Errorf("LeaveThread with a bad fd = %v, want ErrThreadInside and EBADF naming %s/tasks", err, filepath.Dir(d0.path))
			}
			if len(m.joined) != 1 || m.joined[0] != d0 {
				return fmt.Errorf("after a partial LeaveThread the thread is still joined in %d hierarchies, want 1", len(m.joined))
			}
			if err := m.LeaveThread(); err != nil {
				return fmt.Errorf("LeaveThread: %w", err)
			}
			after, err := threadCgroups(os.Getpid(), tid)
			if err != nil {
				return err
			}
			for _, d := range g.dirs {
				c := d.controllers[0]
				if after.v1Path[c] != before.v1Path[c] {
					return fmt.Errorf("after LeaveThread the thread is in %s:%s, want %s", c, after.v1Path[c], before.v1Path[c])
				}
			}
			return nil
		}()
	}
	go run()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
