package nsjail

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// nsOwner is the host identity the thread that clones the init takes on
// before the clone, so that the sandbox's user namespace is owned by the
// run's own host uid and not by host root.
//
// Why: the kernel makes the creator's euid the owner of a new user
// namespace (kernel/user_namespace.c, create_user_ns: ns->owner =
// cred->euid) and charges every per-user-namespace count of the sandbox
// (inotify instances and watches, fanotify, namespaces, queued signals)
// to each namespace above it against that owner (kernel/ucount.c,
// inc_ucount, inc_rlimit_ucounts). Owned by root, 8 sandboxes holding
// their 16 inotify instances took all 128 of host root's
// (fs.inotify.max_user_instances), and systemd, udev or journald got
// EMFILE. Owned by the run's host uid (hostIDs), the charge falls on a
// user nothing else runs as.
type nsOwner struct {
	uid, gid int
}

// ownerFor is the owner a root-run sandbox's namespace gets: the host ids
// its processes already run as. nil for an unprivileged caller, who owns
// its namespace already and may not change its ids.
func ownerFor(runID string) *nsOwner {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := hostIDs(runID)
	return &nsOwner{uid: uid, gid: gid}
}

// onThread calls fn with becomeOn's error on a locked OS thread that is
// not the process's main thread and that no other goroutine ever runs on:
// it is never unlocked, so Go ends it with the goroutine
// (runtime.LockOSThread: "If the calling goroutine exits without
// unlocking the thread, the thread will be terminated"). The main thread
// is the exception: Go wedges it instead of ending it, and its ids are
// the ones ps and /proc/PID/status show for sbx. When the goroutine got
// the main thread, it keeps it locked, so that the scheduler cannot give
// it to the goroutine it starts for the work, and waits for that one.
func (o *nsOwner) onThread(fn func(error)) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.onThread(fn)
		}()
		<-done
		runtime.UnlockOSThread() // its credentials are untouched
		return
	}
	fn(o.becomeOn())
}

// becomeOn changes the credentials of the calling OS thread only, which
// onThread then never gives back. Linux credentials are per thread
// (credentials(7)); the steps are raw syscalls because syscall.Setresuid
// and glibc's setresuid change every thread of the process
// (AllThreadsSyscall, the setxid broadcast).
//
// Only the effective ids change. The namespace's owner and group are the
// effective ones (create_user_ns), and the real and saved ids stay 0, so
// that no process of the run's uid may signal or ptrace the thread
// (kill(2) and ptrace(2) compare against the target's real and saved
// uid), and the namespace records RLIMIT_NPROC as unenforced for its
// parent level, as before, since the creator's real uid is 0
// (kernel/user_namespace.c enforced_nproc_rlimit). The euid change also
// sets the whole process's dumpable flag to fs.suid_dumpable
// (kernel/cred.c commit_creds): a root-run sbx is not dumpable from its
// first sandbox on.
func (o *nsOwner) becomeOn() error {
	steps := []struct {
		name string
		fn   func() error
	}{
		{"prctl PR_SET_SECUREBITS SECBIT_NO_SETUID_FIXUP", keepCapsAcrossUIDChange},
		{fmt.Sprintf("setresgid -1 %d -1", o.gid), func() error { return setresThread(unix.SYS_SETRESGID, o.gid) }},
		{fmt.Sprintf("setresuid -1 %d -1", o.uid), func() error { return setresThread(unix.SYS_SETRESUID, o.uid) }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return fmt.Errorf("making the sandbox's user namespace owned by uid %d: %s: %w", o.uid, s.name, err)
		}
	}
	return nil
}

// secbitNoSetuidFixup is SECBIT_NO_SETUID_FIXUP
// (include/uapi/linux/securebits.h; x/sys/unix does not carry it).
const secbitNoSetuidFixup = 1 << 2

// keepCapsAcrossUIDChange sets SECBIT_NO_SETUID_FIXUP on this thread:
// the kernel then leaves its permitted, effective and ambient sets alone
// when the effective uid goes from 0 to nonzero (capabilities(7), "Effect
// of user ID changes on capabilities"). The thread keeps what cmd.Start
// needs after the clone: CAP_SETGID over the host namespace to write the
// gid map with setgroups allowed, CAP_SETFCAP to map the sandbox's uid 0,
// CAP_DAC_OVERRIDE to open the child's /proc files and the cgroup for
// CLONE_INTO_CGROUP (user_namespaces(7), kernel/user_namespace.c
// new_idmap_permitted, verify_root_map). The new namespace starts its
// child with the default securebits (set_cred_user_ns), so the bit does
// not reach the sandbox. Needs CAP_SETPCAP; the other bits are kept.
func keepCapsAcrossUIDChange() error {
	cur, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(cur|secbitNoSetuidFixup), 0, 0, 0)
}

// setresThread is setres[ug]id(-1, id, -1) on the calling thread alone.
func setresThread(nr uintptr, id int) error {
	keep := ^uintptr(0) // -1: unchanged
	if _, _, e := syscall.RawSyscall(nr, keep, uintptr(id), keep); e != 0 {
		return e
	}
	return nil
}
