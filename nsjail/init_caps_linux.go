package nsjail

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// initCaps are the only capabilities the init keeps across its execve, as
// ambient capabilities (the init runs as the non-root sandbox uid, whose
// execve would otherwise clear them; capabilities(7), "Ambient"):
// CAP_SYS_ADMIN for mount, pivot_root and sethostname, CAP_NET_ADMIN to
// bring lo up, CAP_SETPCAP to lock the securebits and empty the bounding
// set, CAP_SYS_RESOURCE to set the sandbox's user.max_user_namespaces to
// 0 and its other /proc/sys/user quotas (userNSQuotas),
// CAP_NET_BIND_SERVICE to bind the DNS stub's port 53 and the transparent
// listeners' ports 80 and 443, CAP_NET_RAW for the SYN watch's AF_PACKET
// socket on lo (init_egress_linux.go, openSYNWatch). All are scoped to the
// sandbox's own user namespace, and dropped before the payload runs.
var initCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE, unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_RAW}

// The steps below change per-thread credentials. They run on the init's
// locked OS thread, and the payload is forked from that same thread, so it
// inherits exactly this state (credentials(7): "per-thread").

// clearAmbientCaps empties the ambient set, so that no capability can come
// back across the payload's execve.
func clearAmbientCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	return nil
}

// dropBoundingSet removes every capability from the bounding set, up to
// the kernel's last one (PR_CAPBSET_DROP answers EINVAL past it).
func dropBoundingSet() error {
	for c := 0; c < 64; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			if c == 0 {
				return fmt.Errorf("prctl PR_CAPBSET_DROP 0: %w", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("prctl PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	return nil
}

// setNoNewPrivs makes execve unable to grant privileges (setuid bits, file
// capabilities) to the payload or anything it runs; it is inherited across
// fork and execve and cannot be unset (prctl(2), PR_SET_NO_NEW_PRIVS).
func setNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_NO_NEW_PRIVS 1: %w", err)
	}
	return nil
}

// clearCapSets empties the effective, permitted and inheritable sets.
func clearCapSets() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset(0, 0, 0): %w", err)
	}
	// Fail closed: read back what the kernel holds now.
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("capset: capabilities remain after clearing (%+v)", data)
		}
	}
	return nil
}

// setNotDumpable keeps the payload away from the init: a non-dumpable
// process cannot be ptraced, and its /proc/1/mem, /proc/1/exe (the path to
// the sbx binary, CVE-2019-5736) and /proc/1/environ are closed to others.
func setNotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE 0: %w", err)
	}
	return nil
}

// lockSecurebits makes root special nowhere and locks it so: no
// capabilities from uid 0 at execve (NOROOT), none kept or dropped on
// setuid transitions (NO_SETUID_FIXUP), KEEP_CAPS off, no ambient raise;
// each with its lock, so the payload cannot undo any of it
// (capabilities(7), "The securebits flags"). Needs CAP_SETPCAP, so it
// comes before the capability sets are emptied.
func lockSecurebits() error {
	// include/uapi/linux/securebits.h (x/sys/unix does not carry them).
	const (
		noroot                  = 1 << 0
		norootLocked            = 1 << 1
		noSetuidFixup           = 1 << 2
		noSetuidFixupLocked     = 1 << 3
		keepCapsLocked          = 1 << 5
		noCapAmbientRaise       = 1 << 6
		noCapAmbientRaiseLocked = 1 << 7
	)
	bits := noroot | norootLocked | noSetuidFixup | noSetuidFixupLocked | keepCapsLocked | noCapAmbientRaise | noCapAmbientRaiseLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_SECUREBITS %#x: %w", bits, err)
	}
	return nil
}
