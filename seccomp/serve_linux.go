package seccomp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notif mirrors struct seccomp_notif and notifResp struct
// seccomp_notif_resp (linux/seccomp.h); x/sys/unix has the ioctl numbers,
// which encode these sizes (80 and 24 bytes), but not the structs.
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// The ioctl numbers encode the struct sizes: fail the build if they drift.
var (
	_ [unix.SECCOMP_IOCTL_NOTIF_RECV>>16&0x3fff - unsafe.Sizeof(notif{})]struct{}
	_ [unsafe.Sizeof(notif{}) - unix.SECCOMP_IOCTL_NOTIF_RECV>>16&0x3fff]struct{}
	_ [unix.SECCOMP_IOCTL_NOTIF_SEND>>16&0x3fff - unsafe.Sizeof(notifResp{})]struct{}
	_ [unsafe.Sizeof(notifResp{}) - unix.SECCOMP_IOCTL_NOTIF_SEND>>16&0x3fff]struct{}
)

// Serve answers the notifications of f's listener until ctx ends or no
// task uses the filter any more (the listener polls POLLHUP, Linux 5.9):
// each denied syscall is counted by its number, then failed with
// f.ErrnoFor(nr). A held one (f.IsHold) is not counted: hold, if not nil,
// runs with the caller's pid (in the listener's pid namespace), and the
// syscall then continues, or fails with EPERM if hold returned an error.
// Serve returns nil then, and an error only when the listener itself
// fails.
//
// Run it on a thread without the filter: in the sandbox init, a goroutine
// other than the locked one that called Load (see Load). Stop it by
// cancelling ctx once the payload's processes are gone, and close the
// listener only after Serve has returned. While the listener is open and
// nobody serves it, a denied call waits; so if Serve returns an error,
// close the listener at once: from then on a denied call fails with
// ENOSYS, unreported (seccomp_unotify(2); TestKernelClosedListener).
//
// A caller killed while its syscall waits is not counted if Serve had not
// read its notification yet; a call interrupted by a signal and restarted
// arrives, and is counted, again.
func Serve(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(efd, one[:])
		close(woken)
	})
	defer func() {
		// The wake-up must not write to efd's number after it is closed
		// and perhaps reused.
		if !stop() {
			<-woken
		}
		unix.Close(efd)
	}()

	fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("poll seccomp listener %d: %w", listener, err)
		}
		switch ev := fds[0].Revents; {
		case fds[1].Revents != 0:
			return nil
		case ev&unix.POLLIN != 0:
			if err := answer(listener, f, count, hold); err != nil {
				return err
			}
		case ev&unix.POLLNVAL != 0:
			return fmt.Errorf("poll seccomp listener %d: %w", listener, unix.EBADF)
		case ev&(unix.POLLHUP|unix.POLLERR) != 0:
			return nil
		}
	}
	return nil
}

// answer receives one notification and fails its syscall, or lets a held
// one continue.
func answer(listener int, f *Filter, count func(nr int), hold func(pid int) error) error {
	// The kernel refuses a receive buffer that is not zeroed (EINVAL).
	var n notif
	if err := ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
		// ENOENT: the caller was killed or interrupted between poll and
		// here, and its notification is gone.
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("ioctl(%d, SECCOMP_IOCTL_NOTIF_RECV): %w", listener, err)
	}
	nr := int(n.Data.Nr)
	var resp notifResp
	if f.IsHold(nr) {
		resp = notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		if hold != nil {
			if err := hold(int(n.Pid)); err != nil {
				resp = notifResp{ID: n.ID, Error: -int32(unix.EPERM)}
			}
		}
	} else {
		count(nr)
		e := f.ErrnoFor(nr)
		if !validErrno(e) {
			// An error of 0 would let the denied syscall return success.
			e = int(unix.EPERM)
		}
		// The kernel stores error as the syscall's return value unchecked
		// (syscall_set_return_value), so it must be the negated errno.
		resp = notifResp{ID: n.ID, Error: -int32(e)}
	}
	for {
		err := ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			// ENOENT: the caller died or took a signal meanwhile; a
			// restarted syscall arrives as a new notification.
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("ioctl(%d, SECCOMP_IOCTL_NOTIF_SEND, %s): %w", listener, "syscall "+strconv.Itoa(nr), err)
		}
	}
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
