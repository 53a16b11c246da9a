package nsjail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// forbidNestedUserNS sets the sandbox's own user.max_user_namespaces to 0:
// the kernel then refuses any user namespace below it, whatever the
// seccomp policy (user_namespaces(7); bubblewrap's --disable-userns does
// the same). The limit belongs to the sandbox's user namespace, whose
// root may set it with CAP_SYS_RESOURCE there (kernel/ucount.c).
func forbidNestedUserNS() error {
	fd, err := unix.Open("/proc/sys/user/max_user_namespaces", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /proc/sys/user/max_user_namespaces: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("0\n")); err != nil {
		return fmt.Errorf("write 0 to /proc/sys/user/max_user_namespaces: %w", err)
	}
	return nil
}
