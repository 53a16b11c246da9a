package nsjail

import (
	"fmt"

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
