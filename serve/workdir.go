package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// workPrefix names the directory below $TMPDIR where one `sbx serve`
// process keeps its runs' input and output files. A server killed with
// SIGKILL (or OOM-killed) runs no deferred RemoveAll: the next server to
// start in the same TMPDIR removes what it left (sweepWorkDirs).
const workPrefix = "sbx-serve-work-"

// workLock is the file in a work directory its server holds an flock(2)
// on for as long as it runs: the kernel drops the lock when the process
// dies, however it dies, so a lock that can be taken is a dead owner's.
const workLock = ".lock"

// workDir is the server's own directory for its runs' files, made at the
// first run that needs one and removed by Drain.
type workDir struct {
	mu   sync.Mutex
	path string
	lock *os.File
}

// run makes a directory for one run below the work directory.
func (d *workDir) run() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path == "" {
		path, err := os.MkdirTemp("", workPrefix)
		if err != nil {
			return "", err
		}
		f, err := os.OpenFile(filepath.Join(path, workLock), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			os.RemoveAll(path)
			return "", err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			os.RemoveAll(path)
			return "", fmt.Errorf("flock %s LOCK_EX: %w", f.Name(), err)
		}
		d.path, d.lock = path, f
	}
	return os.MkdirTemp(d.path, "run-")
}

// remove removes the work directory (the drain: every run is over).
func (d *workDir) remove() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path != "" {
		os.RemoveAll(d.path)
		d.lock.Close()
		d.path, d.lock = "", nil
	}
}

// sweepWorkDirs removes the work directories in dir whose server is dead:
// those whose lock file this process can flock. A live server's (another
// `sbx serve` sharing TMPDIR) stays; one of another user, which this one
// cannot open or remove, is left and named in the returned error.
func sweepWorkDirs(dir string) (removed []string, err error) {
	ents, _ := filepath.Glob(filepath.Join(dir, workPrefix+"*"))
	var errs []error
	for _, p := range ents {
		f, err := os.OpenFile(filepath.Join(p, workLock), os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// Killed between MkdirTemp and its lock: nothing ran in it.
				if err := os.RemoveAll(p); err == nil {
					removed = append(removed, p)
				}
				continue
			}
			errs = append(errs, fmt.Errorf("open %s: %w", filepath.Join(p, workLock), err))
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // held: a live server's
			continue
		}
		err = os.RemoveAll(p)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
