// Package kernel answers one question about the running kernel: is it at
// least a given release. sbx's steps that depend on a kernel version
// (CLONE_INTO_CGROUP from 5.7, the lock-free v1 self-move from 5.17,
// cgroup.kill from 5.14) and their doctor checks and tests ask it here.
package kernel

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AtLeast reports whether the running kernel's release (uname(2)) is at
// least major.minor. An unreadable release counts as too old: every caller
// then takes the path that works on any kernel.
func AtLeast(major, minor int) bool {
	ma, mi, ok := Release()
	return ok && (ma > major || ma == major && mi >= minor)
}

// Release is the running kernel's major and minor version, from uname(2)'s
// release string ("6.18.44-..."); ok is false when it cannot be read.
func Release() (major, minor int, ok bool) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0, 0, false
	}
	n, _ := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor, n == 2
}
