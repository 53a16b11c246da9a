package install

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	Data  Data
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
//
// A call through another ABI of the machine (Filter.Notify programs send
// those here too, see build) is never answered: Serve kills the caller's
// process with SIGKILL, as SECCOMP_RET_KILL_PROCESS would have, and the
// syscall never runs.
func Serve(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error) error {
	return ServeAndKill(ctx, listener, f, count, hold, nil)
}

// ServeAndKill is Serve that also tells killed the thread group id (in the
// listener's pid namespace) of each process it killed for a call through
// another ABI: a record of the filter's kill that the process cannot
// fake, unlike the SIGSYS that KILL_PROCESS leaves, which any process can
// send itself.
func ServeAndKill(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error, killed func(tgid int)) error {
	arch, err := NativeArch()
	if err != nil {
		return err
	}
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
			if err := answer(listener, arch, f, count, hold, killed); err != nil {
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

// answer receives one notification and fails its syscall, lets a held one
// continue, or kills its caller for a call through another ABI.
func answer(listener int, arch ArchInfo, f *Filter, count func(nr int), hold func(pid int) error, killed func(tgid int)) error {
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
	if foreignABI(n.Data, arch) {
		tgid, ok := killCaller(listener, &n)
		if ok {
			if killed != nil {
				killed(tgid)
			}
			return nil
		}
		// Not killed (gone already, or not visible from here): fail the
		// call; its number means nothing in the native table, so it is
		// neither counted nor looked up.
		return respond(listener, &n, int(unix.ENOSYS))
	}
	nr := int(n.Data.Nr)
	if f.IsHold(nr) {
		if hold != nil {
			if err := hold(int(n.Pid)); err != nil {
				return respond(listener, &n, int(unix.EPERM))
			}
		}
		return send(listener, &n, notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE})
	}
	count(nr)
	e := f.ErrnoFor(nr)
	if !validErrno(e) {
		// An error of 0 would let the denied syscall return success.
		e = int(unix.EPERM)
	}
	return respond(listener, &n, e)
}

// respond fails the notified syscall with errno e.
func respond(listener int, n *notif, e int) error {
	// The kernel stores error as the syscall's return value unchecked
	// (syscall_set_return_value), so it must be the negated errno.
	return send(listener, n, notifResp{ID: n.ID, Error: -int32(e)})
}

// send answers notification n with resp.
func send(listener int, n *notif, resp notifResp) error {
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
			return fmt.Errorf("ioctl(%d, SECCOMP_IOCTL_NOTIF_SEND, %s): %w", listener, "syscall "+strconv.Itoa(int(n.Data.Nr)), err)
		}
	}
}

// foreignABI tells a call through another ABI of the machine: another
// audit arch (int 0x80 into the i386 table), or an x32 number.
func foreignABI(d Data, arch ArchInfo) bool {
	return d.Arch != arch.Native || arch.X32 && uint32(d.Nr)&X32SyscallBit != 0
}

// seccompIoctlNotifIDValid is SECCOMP_IOCTL_NOTIF_ID_VALID as Linux 5.0
// defined it, _IOR('!', 2, __u64); 5.17 corrected the direction to _IOW
// and still accepts this value (linux/seccomp.h,
// SECCOMP_IOCTL_NOTIF_ID_VALID_WRONG_DIR). x/sys/unix does not carry it.
const seccompIoctlNotifIDValid = 0x40082102

// killCaller SIGKILLs the process of the thread waiting in notification
// n and returns its thread group id. The tgid is read while the thread
// still waits, and SECCOMP_IOCTL_NOTIF_ID_VALID then confirms it has not
// gone (and its pid been reused) since (seccomp_unotify(2)). SIGKILL to
// any thread ends its whole thread group (signal(7)).
func killCaller(listener int, n *notif) (int, bool) {
	tid := int(n.Pid)
	if tid <= 0 {
		return 0, false // in a pid namespace the listener cannot see
	}
	tgid := tgidOf(tid)
	id := n.ID
	if ioctlPtr(listener, seccompIoctlNotifIDValid, unsafe.Pointer(&id)) != nil {
		return 0, false
	}
	if unix.Kill(tid, unix.SIGKILL) != nil {
		return 0, false
	}
	return tgid, true
}

// tgidOf reads the thread group id of thread tid from /proc, or returns
// tid when /proc cannot tell (a thread group leader's tid is its tgid).
func tgidOf(tid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return tid
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
