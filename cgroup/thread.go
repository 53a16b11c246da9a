package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrThreadInside means the calling thread could not be moved back out of
// the Group (LeaveThread, or JoinThread undoing a partial move) and is
// still in it in at least one hierarchy. The caller must not go on with
// that thread: whatever it forks is born in the sandbox's cgroup, it
// counts in pids.max, it is frozen by Kill's freezer, and its process is
// listed in cgroup.procs. Let it exit (a Go thread locked and never
// unlocked ends with its goroutine) before the Group is killed.
var ErrThreadInside = errors.New("the calling thread is still in the sandbox's cgroup")

// ThreadMove is one OS thread's stay in a v1 Group, from JoinThread to
// LeaveThread, both on that thread.
type ThreadMove struct {
	g      *Group
	tid    int
	joined []*cgDir // the hierarchies where the thread is in the Group
}

// openTasksFDs opens the tasks file of d and of sbx's own cgroup in the
// same hierarchy (h.base), for JoinThread and LeaveThread. They are opened
// here, by New, with the process's credentials, on purpose: cgroup v1
// checks a move against the credentials the file was opened with
// (kernel/cgroup/cgroup-v1.c __cgroup1_procs_write: of->file->f_cred, euid
// 0 or the task's uid or suid; Linux 5.16, commit 1756d7994ad8, in the
// 5.4 and 5.10 stable trees too), not the writer's. The thread that clones
// a root-run sandbox's init has taken the run's uid as its euid
// (nsjail's nsOwner) while its real and saved uid stay 0, so a file it
// opened itself would refuse the move with EACCES.
func (d *cgDir) openTasksFDs(h hierarchy) error {
	fd, err := unix.Openat(d.fd, "tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(d.path, "tasks"), err)
	}
	home := filepath.Join(h.base, "tasks")
	hfd, err := unix.Open(home, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("open %s: %w", home, err)
	}
	d.tasksFD, d.homeTasksFD, d.homeCgroup = fd, hfd, h.cgroupPath
	return nil
}

func (d *cgDir) closeTasksFDs() {
	for _, fd := range []*int{&d.tasksFD, &d.homeTasksFD} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// JoinThread moves the calling OS thread, and no other thread of the
// process, into the Group in every v1 hierarchy, by writing "0" (the
// writer itself) to each directory's tasks file (cgroup-v1/cgroups.rst
// 2.2). What the thread clones afterwards is born in the Group, as a
// child of CLONE_INTO_CGROUP is on v2 (copy_process: cgroup_fork gives the
// child its parent thread's css_set): no attach afterwards, no window
// outside.
//
// Why the thread and not the child: writing a pid to cgroup.procs takes
// the global cgroup_threadgroup_rwsem for writing, whose rcu_sync waits
// out an RCU grace period (0-20 ms measured here); a thread moving itself
// skips that lock (kernel/cgroup/cgroup.c cgroup_procs_write_start, "If
// we migrate a single thread, we don't care about threadgroup stability":
// commit 9a3284fad42f, Linux 5.17, in the 5.4+ stable trees too). On an
// older kernel the write takes the lock and the caller should not use
// this at all.
//
// The caller must be locked to its OS thread (runtime.LockOSThread) until
// LeaveThread has returned nil; the Go runtime creates new threads for a
// locked one through its template thread (runtime.newm), so no thread is
// born inside meanwhile. The thread must be in sbx's own cgroup in each
// hierarchy (it is checked: /proc/thread-self/cgroup), where LeaveThread
// puts it back.
//
// On an error nothing moved, unless it wraps ErrThreadInside: then the
// undo failed too, and the thread is still inside.
func (g *Group) JoinThread() (*ThreadMove, error) {
	tid := unix.Gettid()
	if g.mode != ModeV1 {
		return nil, fmt.Errorf("join thread %d: a %s group has no tasks file to move a thread with", tid, g.mode)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return nil, fmt.Errorf("join thread %d: cgroup already destroyed", tid)
	}
	for _, d := range g.dirs {
		if d.openErr != nil {
			return nil, fmt.Errorf("join thread %d: %w", tid, d.openErr)
		}
	}
	if err := g.checkThreadHome(tid); err != nil {
		return nil, err
	}
	m := &ThreadMove{g: g, tid: tid}
	for _, d := range g.dirs {
		if err := writeSelf(d.tasksFD, d.path, "join", tid); err != nil {
			if uerr := m.leave(); uerr != nil {
				return nil, errors.Join(err, uerr)
			}
			return nil, err
		}
		m.joined = append(m.joined, d)
	}
	return m, nil
}

// checkThreadHome makes sure the calling thread is in sbx's own cgroup
// (the Group's parent) in each hierarchy: that is where LeaveThread moves
// it back to.
func (g *Group) checkThreadHome(tid int) error {
	const path = "/proc/thread-self/cgroup" // Linux 3.17
	b, err := readFile(path)
	if err != nil {
		return fmt.Errorf("join thread %d: %w", tid, err)
	}
	for _, d := range g.dirs {
		got, err := v1PathOf(b, d.controllers[0])
		if err != nil {
			return fmt.Errorf("join thread %d: parse %s: %w", tid, path, err)
		}
		if got != d.homeCgroup {
			return fmt.Errorf("join thread %d: %s names cgroup1 %s:%s, not sbx's own cgroup %s", tid, path, d.controllers[0], got, d.homeCgroup)
		}
	}
	return nil
}

// v1PathOf is the path /proc/.../cgroup content b gives for a v1
// controller ("4:memory:/a", "2:cpu,cpuacct:/"), "" if none: what
// parseProcCgroup finds, without building its map on every clone.
func v1PathOf(b []byte, controller string) (string, error) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if len(line) == 0 {
			continue
		}
		_, rest, ok1 := bytes.Cut(line, []byte(":"))
		ctrls, path, ok2 := bytes.Cut(rest, []byte(":"))
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad line %q", line)
		}
		for len(ctrls) > 0 {
			c := ctrls
			if i := bytes.IndexByte(ctrls, ','); i >= 0 {
				c, ctrls = ctrls[:i], ctrls[i+1:]
			} else {
				ctrls = nil
			}
			if string(c) == controller {
				return string(path), nil
			}
		}
	}
	return "", nil
}

// LeaveThread moves the calling thread back into sbx's own cgroup in each
// hierarchy JoinThread moved it from ("0" to the parent's tasks file), so
// that it never counts in the sandbox's pids.max, is never frozen with
// it, and never keeps its rmdir busy. It tries every hierarchy; an error
// wraps ErrThreadInside and names each that failed. Called on any other
// thread, it moves nothing and says so.
func (m *ThreadMove) LeaveThread() error {
	if tid := unix.Gettid(); tid != m.tid {
		return fmt.Errorf("%w: leave thread: called on thread %d, joined on thread %d", ErrThreadInside, tid, m.tid)
	}
	m.g.mu.RLock()
	defer m.g.mu.RUnlock()
	return m.leave()
}

func (m *ThreadMove) leave() error {
	var errs []error
	var still []*cgDir
	for _, d := range m.joined {
		if err := writeSelf(d.homeTasksFD, filepath.Dir(d.path), "leave", m.tid); err != nil {
			errs = append(errs, err)
			still = append(still, d)
		}
	}
	m.joined = still
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrThreadInside, errors.Join(errs...))
	}
	return nil
}

// writeSelf writes "0" to the tasks file of the cgroup dir: pid 0 is the
// writer itself. The path is joined only for an error: this runs twice
// per hierarchy on every clone.
func writeSelf(fd int, dir, step string, tid int) error {
	for {
		_, err := unix.Write(fd, []byte("0"))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s thread %d: write 0 to %s: %w", step, tid, filepath.Join(dir, "tasks"), err)
		}
		return nil
	}
}
