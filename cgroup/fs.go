package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The helpers below talk to cgroupfs with raw syscalls rather than os.File:
// one open, one write, one close per value, errors that keep the errno
// (errors.Is(err, unix.EBUSY) works) and name the file and the value.

// writeFile writes value to a cgroup interface file in one write(2): the
// kernel parses each write on its own, so a value must never be split.
func writeFile(path, value string) error {
	return writeFileAt(unix.AT_FDCWD, "", path, value)
}

// writeFileAt is writeFile for the file name in the directory dirfd
// (whose path is dir, for the error): openat(2) of one path component
// instead of a walk of the whole /sys/fs/cgroup/... path, for the files
// of a Group's own directories, whose fds New holds (cgDir.fd). With
// dirfd AT_FDCWD, name is a path and dir is "".
func writeFileAt(dirfd int, dir, name, value string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte(value))
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("write %s to %s: %w", quoteValue(value), filepath.Join(dir, name), err)
	}
	return nil
}

func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n") {
		return strconv.Quote(v)
	}
	return v
}

// readFile reads a whole cgroup interface file: open, read until EOF,
// close. os.ReadFile would add an fstat (useless: kernfs reports a size of
// 4096 whatever the content) and a failing epoll registration per file.
func readFile(path string) ([]byte, error) {
	return readFileAt(unix.AT_FDCWD, "", path)
}

// readFileAt is readFile for the file name in the directory dirfd (see
// writeFileAt).
func readFileAt(dirfd int, dir, name string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readInt reads a file holding one integer ("max" reads as -1).
func readInt(path string) (int64, error) {
	return readIntAt(unix.AT_FDCWD, "", path)
}

func readIntAt(dirfd int, dir, name string) (int64, error) {
	b, err := readFileAt(dirfd, dir, name)
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %q is not an integer", filepath.Join(dir, name), s)
	}
	return v, nil
}

// keyValue returns the value of "key N" in a flat-keyed file such as
// cpu.stat, memory.events, pids.events or memory.oom_control
// (Documentation/admin-guide/cgroup-v2.rst, "Format").
func keyValue(content []byte, key string) (int64, bool) {
	for len(content) > 0 {
		line := content
		if i := bytes.IndexByte(content, '\n'); i >= 0 {
			line, content = content[:i], content[i+1:]
		} else {
			content = nil
		}
		if len(line) > len(key) && line[len(key)] == ' ' && string(line[:len(key)]) == key {
			v, err := strconv.ParseInt(string(bytes.TrimSpace(line[len(key)+1:])), 10, 64)
			if err != nil {
				return 0, false
			}
			return v, true
		}
	}
	return 0, false
}

// readKey reads one key of a flat-keyed file.
func readKey(path, key string) (int64, error) {
	return readKeyAt(unix.AT_FDCWD, "", path, key)
}

func readKeyAt(dirfd int, dir, name, key string) (int64, error) {
	b, err := readFileAt(dirfd, dir, name)
	if err != nil {
		return 0, err
	}
	v, ok := keyValue(b, key)
	if !ok {
		return 0, fmt.Errorf("parse %s: no %q line", filepath.Join(dir, name), key)
	}
	return v, nil
}

// The files of one of a Group's directories, opened relative to its fd.
func (d *cgDir) write(name, value string) error     { return writeFileAt(d.fd, d.path, name, value) }
func (d *cgDir) read(name string) ([]byte, error)   { return readFileAt(d.fd, d.path, name) }
func (d *cgDir) readInt(name string) (int64, error) { return readIntAt(d.fd, d.path, name) }
func (d *cgDir) readKey(name, key string) (int64, error) {
	return readKeyAt(d.fd, d.path, name, key)
}

// readPids reads a cgroup.procs file: one pid a line, in the reader's pid
// namespace.
func readPids(path string) ([]int, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %q is not a pid", path, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// isPermission reports errors that mean "this cgroup is not ours to write"
// (no delegation, not root, read-only cgroupfs), as opposed to a bug or a
// kernel refusal that a caller must see.
func isPermission(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}

// optional is err, or nil when it is ENOENT: the files of a controller
// that is not enabled in the group do not exist, and its value stays 0,
// unknown.
func optional(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
