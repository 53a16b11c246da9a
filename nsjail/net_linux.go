package nsjail

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// bringLoopbackUp sets IFF_UP on lo, the only interface of the sandbox's
// fresh network namespace (it starts down; netdevice(7), SIOCSIFFLAGS).
func bringLoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_INET, SOCK_DGRAM): %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("ioctl SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("ioctl SIOCSIFFLAGS lo up: %w", err)
	}
	return nil
}

func setHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname %s: %w", name, err)
	}
	if err := unix.Setdomainname([]byte("(none)")); err != nil {
		return fmt.Errorf("setdomainname: %w", err)
	}
	return nil
}

// rlimitResources names the setrlimit(2) resources a Spec may set.
var rlimitResources = map[string]int{
	"RLIMIT_AS":         unix.RLIMIT_AS,
	"RLIMIT_CORE":       unix.RLIMIT_CORE,
	"RLIMIT_CPU":        unix.RLIMIT_CPU,
	"RLIMIT_DATA":       unix.RLIMIT_DATA,
	"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
	"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
	"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
	"RLIMIT_STACK":      unix.RLIMIT_STACK,
	"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
	"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
}

// setRlimits applies the Spec's rlimits to the init; the payload inherits
// them. Lowering needs no privilege; they only ever lower.
func setRlimits(rl []Rlimit) error {
	for _, r := range rl {
		res := rlimitResources[r.Resource]
		lim := syscall.Rlimit{Cur: r.Soft, Max: r.Hard}
		// syscall.Setrlimit, not unix's: it also stops the runtime from
		// restoring its saved RLIMIT_NOFILE in the payload (syscall/rlimit.go).
		if err := syscall.Setrlimit(res, &lim); err != nil {
			return fmt.Errorf("setrlimit %s soft=%d hard=%d: %w", r.Resource, r.Soft, r.Hard, err)
		}
	}
	return nil
}
