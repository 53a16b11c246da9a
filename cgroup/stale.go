package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
//     so nothing is read first. Killing leftovers is not its job.
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
	var errs []error
	for _, base := range bases {
		if err := cleanupDir(base, own); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cleanupDir(base, own string) error {
	f, err := os.Open(base)
	if err != nil {
		return fmt.Errorf("cleanup: open %s: %w", base, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("cleanup: read %s: %w", base, err)
	}
	var errs []error
	for _, name := range names {
		if !strings.HasPrefix(name, "sbx-") {
			continue
		}
		path := filepath.Join(base, name)
		if path == own {
			continue // this process's own supervisor leaf
		}
		if err := removeIfStale(path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeIfStale(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // gone meanwhile, or a file (no cgroup is)
		}
		return fmt.Errorf("cleanup: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil // a live Group owns it
		}
		return fmt.Errorf("cleanup: flock %s: %w", path, err)
	}
	err = unix.Rmdir(path)
	if err == nil || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("cleanup: rmdir %s: %w", path, err)
}
