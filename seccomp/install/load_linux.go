package install

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs the filter on the calling OS thread, and only there: no
// SECCOMP_FILTER_FLAG_TSYNC. The sandbox init locks its goroutine to one
// thread (runtime.LockOSThread) from the start, loads the filter as its
// last step and forks the payload from that thread, so the payload
// inherits the filter while the init's other threads stay unfiltered. Serve
// runs on one of those: a thread answering its own filter's notifications
// could end up waiting on itself. The Go runtime keeps it that way: a
// locked thread never clones new threads itself but has the template
// thread, started by LockOSThread, do it (runtime/proc.go, newm).
//
// The thread must have no_new_privs set (seccomp(2): otherwise only
// CAP_SYS_ADMIN may load a filter); Load checks it rather than trusting
// the kernel's EACCES to say why.
//
// With f.Notify, Load asks for a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER,
// Linux 5.0) and returns its fd, close-on-exec; hand it to Serve. If the
// kernel will not give one — EBUSY when an outer filter of this process
// already has a listener (seccomp(2)), EINVAL before Linux 5.0 — Load
// installs f.Fallback instead, which fails the same syscalls with the same
// errnos unreported, and returns -1. Without f.Notify it returns -1.
//
// Load uses no cgo: the sandbox init loads a filter compiled on the host.
func Load(f *Filter) (listener int, err error) {
	if f == nil {
		return -1, errors.New("seccomp: Load(nil): no filter to load")
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return -1, fmt.Errorf("prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	}
	if nnp != 1 {
		return -1, errors.New("seccomp: no_new_privs is not set on this thread (prctl PR_SET_NO_NEW_PRIVS must come first)")
	}
	if !f.Notify {
		_, err := setModeFilter(f.BPF, 0)
		return -1, err
	}
	fd, err := setModeFilter(f.BPF, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	if err == nil {
		return fd, nil
	}
	if len(f.Fallback) == 0 || !(errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL)) {
		return -1, err
	}
	if _, ferr := setModeFilter(f.Fallback, 0); ferr != nil {
		return -1, fmt.Errorf("%w; fallback without listener: %w", err, ferr)
	}
	return -1, nil
}

// setModeFilter is seccomp(SECCOMP_SET_MODE_FILTER, flags, prog).
func setModeFilter(prog []byte, flags uintptr) (int, error) {
	insns, err := DecodeBPF(prog)
	if err != nil {
		return -1, fmt.Errorf("seccomp: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(insns)
	if errno != 0 {
		name := "0"
		if flags == unix.SECCOMP_FILTER_FLAG_NEW_LISTENER {
			name = "SECCOMP_FILTER_FLAG_NEW_LISTENER"
		}
		return -1, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, %s, %d instructions): %w", name, len(insns), errno)
	}
	return int(r), nil
}
