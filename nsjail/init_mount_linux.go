package nsjail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/rootfs"
)

// stagingDir is where the new root is assembled before pivot_root. Bind
// sources are opened before the staging tmpfs covers it, so a rootfs that
// itself lives below /tmp stays reachable through its fd.
const stagingDir = "/tmp"

// makeRootPrivate stops mount events propagating between the host and the
// sandbox in either direction; the stdlib does this only for Unshareflags,
// not for Cloneflags (see syscall/exec_linux.go).
func makeRootPrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount --make-rprivate /: %w", err)
	}
	return nil
}

// openBindSources opens every bind source with O_PATH, in the init's mount
// namespace (a mount of another namespace cannot be bind-mounted), before
// the staging tmpfs hides anything. fds[i] belongs to plan[i], -1 if none.
func openBindSources(plan []rootfs.Mount) ([]int, error) {
	fds := make([]int, len(plan))
	for i, m := range plan {
		fds[i] = -1
		if m.Kind != rootfs.KindBind {
			continue
		}
		fd, err := unix.Open(m.Src, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll(fds)
			return nil, &pathError{"open", m.Src, err}
		}
		fds[i] = fd
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// pathError keeps the path apart so that the host can print it.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// mountStagingRoot mounts the tmpfs that becomes "/": small, since it
// holds only mount points and the synthetic /etc, and read-only once built.
func mountStagingRoot() error {
	const opts = "mode=0755,size=1m,nr_inodes=4096"
	if err := unix.Mount("tmpfs", stagingDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return &pathError{"mount tmpfs (" + opts + ") on", stagingDir, err}
	}
	return nil
}

// applyMount performs one plan step below the staging root.
func applyMount(m rootfs.Mount, srcFD int) error {
	dst := filepath.Join(stagingDir, m.Dst)
	switch m.Kind {
	case rootfs.KindBind:
		return bindMount(m, srcFD, dst)
	case rootfs.KindTmpfs:
		return mountTmpfs(m, dst)
	case rootfs.KindProc:
		return mountProc(dst)
	case rootfs.KindDevpts:
		return mountDevpts(dst, m.Data)
	case rootfs.KindSymlink:
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.Symlink(m.Src, dst)
	case rootfs.KindFile:
		return writeFile(dst, m.Data, m.Mode)
	case rootfs.KindDir:
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		return os.Chmod(dst, os.FileMode(m.Mode))
	case rootfs.KindRemountRO:
		return remountReadOnly(dst)
	case rootfs.KindSeal:
		return sealReadOnly(dst)
	}
	return fmt.Errorf("unknown mount kind %q", m.Kind)
}

// writeFile creates dst with data. Raw syscalls: os.File would register
// each file with the poller, for nothing.
func writeFile(dst, data string, mode uint32) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(dst, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return &pathError{"create", dst, err}
	}
	defer unix.Close(fd)
	for b := []byte(data); len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			return &pathError{"write", dst, err}
		}
		b = b[n:]
	}
	return unix.Fchmod(fd, mode)
}

// bindMount binds the opened source on dst. It stays as the source was
// (usually writable) until the plan's seal step makes it read-only.
func bindMount(m rootfs.Mount, srcFD int, dst string) error {
	var st unix.Stat_t
	if err := unix.Fstat(srcFD, &st); err != nil {
		return &pathError{"fstat", m.Src, err}
	}
	if err := makeMountPoint(dst, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return &pathError{"create mount point", m.Dst, err}
	}
	src := fmt.Sprintf("/proc/self/fd/%d", srcFD)
	err := unix.Mount(src, dst, "", unix.MS_BIND, "")
	if errors.Is(err, unix.EINVAL) {
		// A tree with locked submounts (mounts inherited from a more
		// privileged namespace) may only be bound with all of them, or
		// the bind would reveal what they cover (fs/namespace.c,
		// do_loopback: has_locked_children). The seal covers them too.
		err = unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, "")
	}
	if err != nil {
		return &pathError{"mount --bind " + m.Src + " on", m.Dst, err}
	}
	return nil
}

// sealReadOnly makes dst and every mount below it read-only, nosuid and
// nodev with one mount_setattr(2) (AT_RECURSIVE, Linux 5.12). Older
// kernels get the same with one remount per mount, read from mountinfo.
// It fails closed: any error but ENOSYS aborts the sandbox.
func sealReadOnly(dst string) error {
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &attr)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) {
		return &pathError{"mount_setattr(AT_RECURSIVE, rdonly,nosuid,nodev)", trimStaging(dst), err}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dst))
	if err != nil {
		return &pathError{"read mountinfo below", trimStaging(dst), err}
	}
	for _, m := range mounts {
		if err := remountReadOnly(m.Mountpoint); err != nil {
			return err
		}
	}
	return nil
}

func makeMountPoint(dst string, dir bool) error {
	if dir {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func remountReadOnly(dst string) error {
	return remountReadOnlyFlags(dst, unix.MS_NOSUID|unix.MS_NODEV)
}

// remountReadOnlyFlags makes the mount at dst read-only, adding extra. A
// remount inside a user namespace must keep every flag the kernel locked
// when the mount was inherited (nosuid, nodev, noexec, the atime flags),
// or it fails with EPERM (mount(2), "EPERM ... locked"; bubblewrap's
// bind-mount.c and runc do the same), so the current flags are read first.
func remountReadOnlyFlags(dst string, extra uintptr) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dst, &sfs); err != nil {
		return &pathError{"statfs", dst, err}
	}
	flags := uintptr(unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY) | extra | lockedFlags(sfs.Flags)
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return &pathError{"mount -o remount,bind,ro(" + mountFlagNames(flags) + ")", trimStaging(dst), err}
	}
	return nil
}

// lockedFlags maps statfs f_flags (ST_*) onto the MS_* flags to keep.
func lockedFlags(st int64) uintptr {
	var f uintptr
	for _, p := range [...]struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st)&p.st != 0 {
			f |= p.ms
		}
	}
	return f
}

func mountFlagNames(f uintptr) string {
	var names []string
	for _, p := range [...]struct {
		f    uintptr
		name string
	}{
		{unix.MS_NOSUID, "nosuid"}, {unix.MS_NODEV, "nodev"}, {unix.MS_NOEXEC, "noexec"},
		{unix.MS_NOATIME, "noatime"}, {unix.MS_NODIRATIME, "nodiratime"}, {unix.MS_RELATIME, "relatime"},
	} {
		if f&p.f != 0 {
			names = append(names, p.name)
		}
	}
	return strings.Join(names, ",")
}

func trimStaging(p string) string {
	if r := strings.TrimPrefix(p, stagingDir); r != p && (r == "" || r[0] == '/') {
		if r == "" {
			return "/"
		}
		return r
	}
	return p
}

// mountTmpfs mounts a size- and inode-capped tmpfs owned by the sandbox
// user (tmpfs takes the mounter's fsuid for its root).
func mountTmpfs(m rootfs.Mount, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return &pathError{"mkdir", m.Dst, err}
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if m.NoExec {
		flags |= unix.MS_NOEXEC
	}
	opts := fmt.Sprintf("mode=%04o,size=%d,nr_inodes=%d", m.Mode, m.Size, m.Inodes)
	if err := unix.Mount("tmpfs", dst, "tmpfs", flags, opts); err != nil {
		return &pathError{"mount tmpfs (" + opts + ") on", m.Dst, err}
	}
	return nil
}

// mountProc mounts a procfs of the sandbox's own pid namespace. The kernel
// allows it in a user namespace only if the host's /proc is fully visible
// (no over-mounts; fs/namespace.c, mnt_already_visible).
func mountProc(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return &pathError{"mkdir", trimStaging(dst), err}
	}
	if err := unix.Mount("proc", dst, "proc", procFlags, ""); err != nil {
		return &pathError{"mount proc on", trimStaging(dst), err}
	}
	return nil
}

// mountDevpts mounts a devpts instance of the sandbox's own (devpts is
// mountable in a user namespace, and clears the nodev that such mounts
// otherwise get: fs/devpts/inode.c, devpts_fill_super). opts are the
// plan's, decided on the host (rootfs.devPlan says why each is there).
func mountDevpts(dst, opts string) error {
	if err := unix.Mount("devpts", dst, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
		return &pathError{"mount devpts (" + opts + ") on", trimStaging(dst), err}
	}
	return nil
}

// maskProc hides or freezes the /proc paths of the Spec's table, after the
// init's own /proc/sys writes (runc applies readonlyPaths and maskPaths
// after the sysctls too), and before the payload exists: it needs
// CAP_SYS_ADMIN in the sandbox's user namespace, which owns this procfs.
// Masking in a user namespace works rootless because the init mounted
// this procfs itself; the host's /proc stays as it is.
func (in *initProc) maskProc() error {
	if len(in.spec.ProcMasks) == 0 {
		return nil
	}
	null, err := openDevNull()
	if err != nil {
		return err
	}
	defer unix.Close(null)
	nullPath := fmt.Sprintf("/proc/self/fd/%d", null)
	in.maskMarks = newMountMarks(in.spec.ProcMasks)
	for i, m := range in.spec.ProcMasks {
		err := applyProcMask(m, nullPath)
		if errors.Is(err, unix.ENOENT) {
			// Not every kernel has every file (timer_stats went in 4.11,
			// sched_debug moved to debugfs in 5.13, config.gz needs
			// CONFIG_IKCONFIG_PROC): nothing to hide.
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		in.maskMarks.done(i)
	}
	return nil
}

// openDevNull opens the sandbox's /dev/null (a bind of the host's) as the
// source of every file mask, and checks that it is the null device: a
// missing or wrong source must fail the masking, not skip it.
func openDevNull() (int, error) {
	fd, err := unix.Open("/dev/null", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &pathError{"open", "/dev/null", err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &pathError{"fstat", "/dev/null", err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		unix.Close(fd)
		return -1, &pathError{"check", "/dev/null", fmt.Errorf("not the null device (mode %#o, rdev %d:%d)", st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))}
	}
	return fd, nil
}

// applyProcMask performs one mask step; ENOENT means Dst does not exist.
func applyProcMask(m rootfs.Mount, nullPath string) error {
	switch m.Kind {
	case rootfs.KindMaskFile:
		return bindNullOver(m.Dst, nullPath)
	case rootfs.KindMaskDir:
		return mountEmptyTmpfsOver(m.Dst)
	case rootfs.KindRebindRO:
		return rebindReadOnly(m.Dst)
	}
	return fmt.Errorf("mount kind %q is not a /proc mask", m.Kind)
}

// bindNullOver binds /dev/null on the file dst: one mount(2).
func bindNullOver(dst, nullPath string) error {
	if err := unix.Mount(nullPath, dst, "", unix.MS_BIND, ""); err != nil {
		return &pathError{"mount --bind /dev/null on", dst, err}
	}
	return nil
}

// mountEmptyTmpfsOver covers the directory dst with an empty, read-only
// tmpfs of the smallest size: one mount(2).
func mountEmptyTmpfsOver(dst string) error {
	const opts = "mode=0555,size=4k,nr_inodes=1"
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return &pathError{"mount tmpfs (ro," + opts + ") on", dst, err}
	}
	return nil
}

// procFlags are the flags the init mounted /proc with (mountProc); a
// remount replaces a mount's flags whole, so the read-only rebind repeats
// them. They are not locked (the init made this mount in its own user
// namespace), so no statfs is needed to find them.
const procFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// rebindReadOnly binds dst on itself and makes that bind read-only: two
// mount(2) calls (a bind cannot be made read-only in the same call,
// mount(2) "Creating a bind mount"). Not recursive: nothing is mounted
// below these /proc directories, and a later mount there needs
// CAP_SYS_ADMIN, which the payload never holds.
func rebindReadOnly(dst string) error {
	if err := unix.Mount(dst, dst, "", unix.MS_BIND, ""); err != nil {
		return &pathError{"mount --bind on itself", dst, err}
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | procFlags)
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return &pathError{"mount -o remount,bind,ro(" + mountFlagNames(flags) + ")", dst, err}
	}
	return nil
}

// pivotRoot makes the staging tmpfs "/" and detaches the old root
// entirely, as runc does: pivot_root(".", ".") stacks the old root on the
// new one, and the lazy unmount removes it with all its submounts
// (pivot_root(2), NOTES).
func pivotRoot() error {
	oldroot, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{"open", "/", err}
	}
	defer unix.Close(oldroot)
	if err := unix.Chdir(stagingDir); err != nil {
		return &pathError{"chdir", stagingDir, err}
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return &pathError{"pivot_root", stagingDir, err}
	}
	if err := unix.Fchdir(oldroot); err != nil {
		return &pathError{"fchdir", "old root", err}
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return &pathError{"umount2 MNT_DETACH", "old root", err}
	}
	if err := unix.Chdir("/"); err != nil {
		return &pathError{"chdir", "/", err}
	}
	return nil
}
