package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// CleanupStale removes the sbx-* cgroups below sbx's own cgroup that no
// live Group owns and that hold no process: those of an sbx that was
// SIGKILLed (its processes died with it through Pdeathsig and the pid
// namespace), and the sbx-supervisor-<pid> leaves of sbx processes that
// have exited. It leaves alone:
//   - anything not named sbx-*;
//   - a cgroup some process still holds the flock of: a Group of this or
//     another live sbx, possibly still empty between New and the start of
//     its init (without the lock, one sbx's cleanup could remove another
//     sbx's fresh cgroup);
//   - a cgroup with processes or child cgroups: rmdir refuses with EBUSY,
//     so nothing is read first. Killing leftovers is not its job, but
//     for one: a group of the v1 freezer hierarchy left frozen by an sbx
//     that died inside its kill, whose processes would otherwise never
//     end (thawFrozen).
//
// With nothing to clean it costs one directory read per hierarchy.
func CleanupStale() error {
	lay, err := currentLayout()
	if err != nil {
		return err
	}
	var bases []string
	switch lay.mode {
	case ModeV2:
		bases = []string{lay.v2.base}
	case ModeV1:
		for _, h := range lay.v1 {
			bases = append(bases, h.base)
		}
	default:
		return nil
	}
	own := lay.ownV2()
	live := map[string]bool{}
	var errs []error
	thawed := false
	for _, base := range bases {
		t, err := cleanupDir(base, own, live)
		if err != nil {
			errs = append(errs, err)
		}
		thawed = thawed || t
	}
	if thawed {
		// A group thawed in the freezer hierarchy was busy in those
		// visited before it: its tasks are gone now, so once more.
		for _, base := range bases {
			if _, err := cleanupDir(base, own, live); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cleanupDir removes the stale sbx-* groups of one hierarchy. live holds
// the names found locked in the hierarchies before (v1 names a sandbox's
// group alike in each): another sbx's live Group, whose directories are
// all locked by it, or are being made by makeLockedDir, which takes a
// concurrent removal in its stride. They are not tried again, so a busy
// host's scan costs a lock attempt per live sandbox, not one per
// hierarchy.
func cleanupDir(base, own string, live map[string]bool) (thawed bool, err error) {
	names, err := staleCandidates(base)
	if err != nil {
		return false, err
	}
	var errs []error
	for _, name := range names {
		path := filepath.Join(base, name)
		if path == own || held(path) || live[name] {
			// This process's own supervisor leaf, a directory of one of
			// its live Groups (flock would refuse: the lock is ours), or
			// a live Group of another sbx: skip the open, flock and close.
			continue
		}
		busy, t, err := removeIfStale(path)
		if err != nil {
			errs = append(errs, err)
		}
		if busy {
			live[name] = true
		}
		thawed = thawed || t
	}
	return thawed, errors.Join(errs...)
}

// staleCandidates lists the sbx-* entries of base, with one open and
// getdents64 until the end and no more: os.File's Readdirnames would add
// two fcntls and a failing epoll registration per directory, and this
// runs in every hierarchy on every run (issue 13). Entries that are not
// directories are left out: every cgroup is one (DT_DIR on cgroupfs,
// kernfs_dir_fop).
func staleCandidates(base string) ([]string, error) {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cleanup: open %s: %w", base, err)
	}
	defer unix.Close(fd)
	var buf [8192]byte
	var names []string
	for {
		n, err := unix.Getdents(fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cleanup: getdents64 %s: %w", base, err)
		}
		if n <= 0 {
			return names, nil
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
			// d_type u8, then the NUL-terminated name (getdents64(2)).
			const nameOff = 19
			if len(b) < nameOff {
				return nil, fmt.Errorf("cleanup: getdents64 %s: a short record", base)
			}
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < nameOff || reclen > len(b) {
				return nil, fmt.Errorf("cleanup: getdents64 %s: a record of %d bytes", base, reclen)
			}
			typ, name := b[18], b[nameOff:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && bytes.HasPrefix(name, []byte("sbx-")) {
				names = append(names, string(name))
			}
		}
	}
}

// heldDirs are the directories of this process's live Groups, from
// makeLockedDir until Destroy has removed them (and let go of their
// lock): CleanupStale need not try their lock.
var (
	heldMu   sync.Mutex
	heldDirs = map[string]bool{}
)

func hold(path string, on bool) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if on {
		heldDirs[path] = true
	} else {
		delete(heldDirs, path)
	}
}

func held(path string) bool {
	heldMu.Lock()
	defer heldMu.Unlock()
	return heldDirs[path]
}

// removeIfStale removes path unless a live Group holds its lock (busy).
// A stale group left frozen is killed and thawed first (thawed), and
// removed once its tasks are gone (thawFrozen).
func removeIfStale(path string) (busy, thawed bool, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return false, false, nil // gone meanwhile, or a file (no cgroup is)
		}
		return false, false, fmt.Errorf("cleanup: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, false, nil // a live Group owns it
		}
		return false, false, fmt.Errorf("cleanup: flock %s: %w", path, err)
	}
	err = unix.Rmdir(path)
	if errors.Is(err, unix.EBUSY) {
		if thawed, err = thawFrozen(path); err != nil || !thawed {
			return false, false, err
		}
		err = unix.Rmdir(path)
	}
	if err == nil || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOENT) {
		return false, thawed, nil
	}
	return false, thawed, fmt.Errorf("cleanup: rmdir %s: %w", path, err)
}

// thawFrozen kills and thaws a stale group of the v1 freezer hierarchy
// that is left frozen, and waits (up to a second) for its tasks to go:
// an sbx that died inside killV1, between its freeze and its thaw, left
// the sandbox's processes frozen for good. A frozen task never runs, so
// neither the SIGKILLs nor its Pdeathsig end it, and rmdir only ever
// says EBUSY (cgroup-v1/freezer-subsystem.rst). The group's lock is
// held, so no live sbx owns it; its listed pids cannot exit and be
// reused while it is frozen. false when path has no freezer.state (not
// the freezer hierarchy, or cgroup v2, where a frozen task still dies
// of SIGKILL) or is not frozen.
func thawFrozen(path string) (bool, error) {
	state := filepath.Join(path, "freezer.state")
	b, err := readFile(state)
	if err != nil || string(b) == "THAWED\n" {
		return false, nil
	}
	kerr := killAll([]string{path})
	if err := writeFile(state, "THAWED"); err != nil {
		return false, errors.Join(kerr, fmt.Errorf("cleanup: thaw %s: %w", path, err))
	}
	waitFor(func() bool {
		pids, err := readPids(filepath.Join(path, "cgroup.procs"))
		return err != nil || len(pids) == 0
	})
	if kerr != nil {
		return true, fmt.Errorf("cleanup: %s was frozen: %w", path, kerr)
	}
	return true, nil
}
