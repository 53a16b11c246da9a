package nsjail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// outputDir writes the run's files below one host directory and nowhere
// else: every open is relative to the directory's fd and refuses symlinks
// and ".." on the way (openat2(2), RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
// Linux 5.6; older kernels get an O_NOFOLLOW walk, component by
// component). Names arrive already made safe (no control characters, no
// invalid UTF-8); a name that is absolute or holds ".." is refused anyway.
// Files are written 0644: the sandbox's setuid, setgid and exec bits never
// reach the host.
type outputDir struct {
	path string
	fd   int
}

func openOutputDir(dir string) (*outputDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--output-dir %s: %w", dir, unwrapPath(err))
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("--output-dir %s: %w", dir, err)
	}
	abs, _ := filepath.Abs(dir)
	return &outputDir{path: abs, fd: fd}, nil
}

func (d *outputDir) Close() error { return unix.Close(d.fd) }

func checkRelative(name string) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("%q is not a relative path", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%q has an empty, . or .. component", name)
		}
	}
	return nil
}

// parent opens (creating as needed) the directory that holds name, and
// returns its fd and the last component; close the fd with closeIfNot.
func (d *outputDir) parent(name string) (int, string, error) {
	if err := checkRelative(name); err != nil {
		return -1, "", err
	}
	dirfd := d.fd
	parts := strings.Split(name, "/")
	for _, p := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(dirfd, p, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			closeIfNot(dirfd, d.fd)
			return -1, "", fmt.Errorf("mkdir %s: %w", p, err)
		}
		next, err := openBeneath(dirfd, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		closeIfNot(dirfd, d.fd)
		if err != nil {
			return -1, "", fmt.Errorf("open directory %s: %w", p, err)
		}
		dirfd = next
	}
	return dirfd, parts[len(parts)-1], nil
}

func (d *outputDir) link(first, name string) (string, error) {
	srcdir, srcbase, err := d.parent(first)
	if err != nil {
		return "", err
	}
	defer closeIfNot(srcdir, d.fd)
	dstdir, dstbase, err := d.parent(name)
	if err != nil {
		return "", err
	}
	defer closeIfNot(dstdir, d.fd)
	// A stale entry of an earlier run is replaced; linkat never follows
	// a symlink at either end without AT_SYMLINK_FOLLOW.
	if err := unix.Unlinkat(dstdir, dstbase, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("replace %s: %w", name, err)
	}
	if err := unix.Linkat(srcdir, srcbase, dstdir, dstbase, 0); err != nil {
		return "", fmt.Errorf("link %s to %s: %w", name, first, err)
	}
	return filepath.Join(d.path, name), nil
}

func (d *outputDir) create(name string) (io.WriteCloser, string, error) {
	dirfd, base, err := d.parent(name)
	if err != nil {
		return nil, "", err
	}
	// A stale file of an earlier run is replaced, not truncated: it may
	// be a hardlink whose other names must keep their content.
	if err := unix.Unlinkat(dirfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		closeIfNot(dirfd, d.fd)
		return nil, "", fmt.Errorf("replace %s: %w", name, err)
	}
	fd, err := openBeneath(dirfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	closeIfNot(dirfd, d.fd)
	if err != nil {
		return nil, "", fmt.Errorf("create %s: %w", name, err)
	}
	// O_CREAT honours the umask and an existing file keeps its mode: set
	// it outright.
	if err := unix.Fchmod(fd, 0o644); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("chmod %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), filepath.Join(d.path, name), nil
}

// remove unlinks a copy that must not stay (partial, or not matching its
// hash), resolving its parents beneath the output dir like create did.
func (d *outputDir) remove(name string) error {
	dirfd, base, err := d.parent(name)
	if err != nil {
		return err
	}
	defer closeIfNot(dirfd, d.fd)
	if err := unix.Unlinkat(dirfd, base, 0); err != nil {
		return fmt.Errorf("unlink %s: %w", name, err)
	}
	return nil
}

func closeIfNot(fd, keep int) {
	if fd != keep {
		unix.Close(fd)
	}
}

// openBeneath opens one path component below dirfd, never through a
// symlink.
func openBeneath(dirfd int, name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(dirfd, name, &how)
	if errors.Is(err, unix.ENOSYS) {
		// One component, O_NOFOLLOW: the same guarantee before 5.6.
		return unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	}
	return fd, err
}
