package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Budgets for waiting on the kernel. Processes killed with SIGKILL leave
// their cgroup as soon as do_exit has run cgroup_exit, typically within a
// millisecond; a process freeing a large address space, or stuck in an
// uninterruptible sleep, takes longer. Variables so that tests can shorten
// them.
var (
	killWait  = 2 * time.Second // Kill: until the Group holds no process
	rmdirWait = 2 * time.Second // Destroy: retrying rmdir on EBUSY
)

// makeLockedDir creates a cgroup directory and takes the lock that marks it
// as in use (stale.go). A concurrent CleanupStale of another sbx may lock
// and remove the new, still empty directory before this process locks it;
// then the lookup below fails and the directory is created again.
func makeLockedDir(path string) (*cgDir, error) {
	for range 3 {
		if err := unix.Mkdir(path, 0o755); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return nil, fmt.Errorf("mkdir %s: %w (a sandbox with this id exists)", path, err)
			}
			return nil, fmt.Errorf("mkdir %s: %w", path, err)
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			unix.Rmdir(path)
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		// Blocking: the only other holder of a fresh directory's lock is a
		// CleanupStale that is about to rmdir it, and it lets go at once.
		if err := flock(fd, unix.LOCK_EX); err != nil {
			unix.Close(fd)
			unix.Rmdir(path)
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, "cgroup.procs", &st, 0); errors.Is(err, unix.ENOENT) {
			unix.Close(fd) // removed under us: a removed cgroup has no files
			continue
		}
		hold(path, true)
		return &cgDir{path: path, fd: fd, tasksFD: -1, homeTasksFD: -1}, nil
	}
	return nil, fmt.Errorf("mkdir %s: removed by a concurrent cleanup three times in a row", path)
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// Kill sends SIGKILL to every process in the Group at once and waits
// (up to 2 s) until the Group holds none; a killed child of the caller is
// then a zombie for the caller to reap (zombies no longer count as
// members). On v2 it writes cgroup.kill (Linux 5.14), else freezes, kills
// each pid and thaws. On v1 it freezes the freezer cgroup (so that nothing
// forks while the pids are read), SIGKILLs each pid in cgroup.procs, and
// thaws (cgroup-v1/freezer-subsystem.rst); without a freezer hierarchy it
// kills pids in rounds until none is left.
func (g *Group) Kill() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return errors.New("kill: cgroup already destroyed")
	}
	var err error
	if g.mode == ModeV2 {
		err = g.killV2()
	} else {
		err = g.killV1()
	}
	if err != nil {
		return err
	}
	return g.waitEmpty()
}

// waitEmpty polls until no process is left, killing stragglers: a process
// that was forking while the pids were read (no freezer) gets its signal
// in the next round.
func (g *Group) waitEmpty() error {
	b := newBackoff(killWait, 50*time.Microsecond, 5*time.Millisecond)
	for {
		pids, err := g.procs()
		if err != nil || len(pids) == 0 {
			return err
		}
		if b.expired() {
			return fmt.Errorf("kill: %d processes still in %s after %v (pids %v; uninterruptible sleep?)", len(pids), strings.Join(g.Paths(), ", "), killWait, pids)
		}
		for _, p := range pids {
			if p != os.Getpid() { // see killAll
				unix.Kill(p, unix.SIGKILL)
			}
		}
		b.sleep()
	}
}

// procs lists the processes of the Group (and of any cgroup below it).
func (g *Group) procs() ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, d := range g.dirs {
		err := filepath.WalkDir(d.path, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // a cgroup below was just removed
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			pids, err := readPids(filepath.Join(p, "cgroup.procs"))
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, pid := range pids {
				if !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// killAll sends SIGKILL to each process listed in dirs once. Pids are read
// from cgroupfs in sbx's pid namespace; the caller froze the cgroup, so a
// listed pid cannot exit and be reused before the signal.
func killAll(dirs []string) error {
	for _, d := range dirs {
		pids, err := readPids(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		for _, p := range pids {
			if p == os.Getpid() {
				// A thread of sbx itself inside (JoinThread, thread.go,
				// whose LeaveThread failed) lists sbx here: never kill
				// the supervisor; waitEmpty then says the Group is busy.
				continue
			}
			if err := unix.Kill(p, unix.SIGKILL); err != nil && err != unix.ESRCH {
				return fmt.Errorf("kill: kill(%d, SIGKILL): %w", p, err)
			}
		}
	}
	return nil
}

// waitFor polls cond for up to a second (freezing normally takes well under
// a millisecond; a task in an uninterruptible sleep delays it).
func waitFor(cond func() bool) bool {
	b := newBackoff(time.Second, 20*time.Microsecond, 2*time.Millisecond)
	for !cond() {
		if b.expired() {
			return false
		}
		b.sleep()
	}
	return true
}

// Destroy removes every directory New made, retrying rmdir on EBUSY for up
// to 2 s while the last processes exit, and closes the Group's fds. It
// does not kill: call Kill first if processes may be left. It is
// idempotent; after an error the Group stays usable (Kill, then Destroy
// again retries what is left).
func (g *Group) Destroy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return nil
	}
	var errs []error
	var left []*cgDir
	for _, d := range g.dirs {
		if err := rmdirRetry(d.path); err != nil {
			errs = append(errs, err)
			left = append(left, d)
			continue
		}
		// Unlock only after the rmdir: until then a CleanupStale must not
		// take the directory for stale.
		d.closeTasksFDs()
		unix.Close(d.fd)
		hold(d.path, false)
	}
	g.dirs = left
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if g.cpuFD >= 0 {
		unix.Close(g.cpuFD)
		g.cpuFD = -1
	}
	g.destroyed = true
	return nil
}

func rmdirRetry(path string) error {
	b := newBackoff(rmdirWait, 100*time.Microsecond, 20*time.Millisecond)
	for {
		err := unix.Rmdir(path)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || b.expired() {
			what := ""
			if errors.Is(err, unix.EBUSY) {
				pids, _ := readPids(filepath.Join(path, "cgroup.procs"))
				what = fmt.Sprintf(" (after %v; pids still inside: %v)", rmdirWait, pids)
			}
			return fmt.Errorf("rmdir %s: %w%s", path, err, what)
		}
		b.sleep()
	}
}
