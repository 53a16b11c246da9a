package nsjail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// errSpawnUnsupported: the init starts through cmd.Start (os/exec), as
// before spawnInit: a build without it (no cgo, not amd64), a
// SysProcAttr it does not handle, or a kernel without clone3
// CLONE_INTO_CGROUP when a cgroup fd is asked for.
var errSpawnUnsupported = errors.New("spawnInit: not supported here")

// spawnStepClone and spawnStepClone3 are the names spawn_linux.c gives
// the clone itself (step_names): the steps whose EPERM is a refused
// namespace, as os/exec's clone error was.
const (
	spawnStepClone  = "clone"
	spawnStepClone3 = "clone3"
)

// SpawnError is a failed step of spawnInit, in the child or the parent.
type SpawnError struct {
	Step, Args string
	Errno      syscall.Errno
}

func (e *SpawnError) Error() string {
	if e.Args == "" {
		return fmt.Sprintf("%s: %v", e.Step, e.Errno)
	}
	return fmt.Sprintf("%s %s: %v", e.Step, e.Args, e.Errno)
}

func (e *SpawnError) Unwrap() error { return e.Errno }

// idMapLine is one line of /proc/PID/[ug]id_map (user_namespaces(7)).
func idMapLine(m syscall.SysProcIDMap) string {
	return fmt.Sprintf("%d %d %d\n", m.ContainerID, m.HostID, m.Size)
}

// cloneFlagNames spells the namespace flags of a clone.
func cloneFlagNames(f uintptr) string {
	names := []struct {
		bit  uintptr
		name string
	}{
		{syscall.CLONE_NEWUSER, "CLONE_NEWUSER"}, {syscall.CLONE_NEWNS, "CLONE_NEWNS"},
		{syscall.CLONE_NEWPID, "CLONE_NEWPID"}, {syscall.CLONE_NEWNET, "CLONE_NEWNET"},
		{syscall.CLONE_NEWIPC, "CLONE_NEWIPC"}, {syscall.CLONE_NEWUTS, "CLONE_NEWUTS"},
		{syscall.CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
	}
	var out []string
	for _, n := range names {
		if f&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(append([]string{"CLONE_VM"}, out...), "|")
}

// waitSpawned waits for an init spawnInit started and fills
// cmd.ProcessState, as cmd.Wait does for one cmd.Start started.
func waitSpawned(cmd *exec.Cmd) error {
	st, err := cmd.Process.Wait()
	if err != nil {
		return err
	}
	cmd.ProcessState = st
	if !st.Success() {
		return &exec.ExitError{ProcessState: st}
	}
	return nil
}

// cloneMark is the timeline's step for the init's clone, naming the path
// that ran: intoCgroup, the init was born in its v2 cgroup.
func cloneMark(spawned, intoCgroup bool) string {
	switch {
	case spawned && intoCgroup:
		return "sbx: clone+exec init (" + spawnPathCgroup + ")"
	case spawned:
		return "sbx: clone+exec init (" + spawnPath + ")"
	}
	return "sbx: clone+exec init (cmd.Start)"
}

// pathFD is N when path is /proc/self/fd/N (the sbx-init memfd,
// initbin), else -1: the child must not move a passed fd onto it before
// its execve resolves the path.
func pathFD(path string) int {
	n, ok := strings.CutPrefix(path, "/proc/self/fd/")
	if !ok {
		return -1
	}
	fd, err := strconv.Atoi(n)
	if err != nil || fd < 0 {
		return -1
	}
	return fd
}

// startWithOSExec is cmd.Start, for the init where spawnInit cannot start
// it (CLONE_INTO_CGROUP, a build without cgo), keeping the fd its path
// names (/proc/self/fd/N, the sbx-init memfd) out of the way of Go's
// child. That child (syscall.forkAndExecInChild1, Go 1.26) moves its own
// sync pipe, and each passed fd lower than its slot, to nextfd and up,
// where nextfd is one past the highest passed fd (or the count of them):
// when N is there, a move replaces the image and the execve fails
// EACCES, as sbx_spawn's own moves did (spawn_linux.c; a busy sbx serve's
// fds reach the memfd's 100). Then the path names a dup of the memfd
// above every fd a move can take, closed once the child has exec'd.
func startWithOSExec(cmd *exec.Cmd) error {
	n := pathFD(cmd.Path)
	lo, hi, ok := osExecMoveRange(cmd)
	if n < 0 || !ok || n < lo || n > hi {
		return cmd.Start()
	}
	dup, err := unix.FcntlInt(uintptr(n), unix.F_DUPFD_CLOEXEC, hi+1)
	if err != nil {
		return fmt.Errorf("fcntl(%d, F_DUPFD_CLOEXEC, %d), a copy of the init's fd out of os/exec's fd moves: %w", n, hi+1, err)
	}
	defer unix.Close(dup)
	path := cmd.Path
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(dup)
	defer func() { cmd.Path = path }()
	return cmd.Start()
}

// osExecMoveRange is the range of fds Go's child may dup3 onto before its
// execve (see startWithOSExec): from one past the highest passed fd, or
// their count, through as many more as there are passed fds, plus its
// sync pipe and the one fd it steps over. ok is false when os/exec opens
// some of the child's fds itself (stdio that is not an *os.File), whose
// numbers are not known before Start.
func osExecMoveRange(cmd *exec.Cmd) (lo, hi int, ok bool) {
	var files []*os.File
	for _, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		fp, isFile := f.(*os.File)
		if !isFile {
			return 0, 0, false
		}
		files = append(files, fp)
	}
	files = append(files, cmd.ExtraFiles...)
	next := len(files)
	for _, f := range files {
		if f != nil && int(f.Fd()) > next {
			next = int(f.Fd())
		}
	}
	next++
	return next, next + len(files) + 1, true
}

// openPidfdNonblock is pidfd_open(pid, PIDFD_NONBLOCK) (Linux 5.10),
// or, where the kernel refuses that flag (EINVAL, 5.3-5.9),
// pidfd_open(pid, 0) with O_NONBLOCK set by fcntl: the netpoller needs
// a non-blocking fd, and waitid with WNOHANG never blocks either way.
func openPidfdNonblock(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err == nil {
		return fd, nil
	}
	if err != unix.EINVAL {
		return -1, fmt.Errorf("pidfd_open %d PIDFD_NONBLOCK: %w", pid, err)
	}
	if fd, err = unix.PidfdOpen(pid, 0); err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fcntl pidfd %d F_SETFL O_NONBLOCK: %w", pid, err)
	}
	return fd, nil
}

// awaitExit returns once the child pid has exited, without reaping it
// (the caller's wait then returns at once), waiting on a pidfd in Go's
// netpoller: pidfd_open(2) (Linux 5.3) is readable once the process is
// gone (pidfd_poll, woken from exit_notify). A blocking waitid(2) holds
// its thread's P in a system call until sysmon retakes it, and with one
// P (an unprivileged exec, internal/leanexec) nothing else runs
// meanwhile: the status lines, the workspace report and the outputs'
// EOFs waited for sysmon's tick, which backs off to 10 ms while nothing
// happens (runtime/proc.go, sysmon and retake). Parked in the netpoller
// the thread holds no P. The child is ours and not yet reaped, so its
// pid cannot be reused under pidfd_open. An error says which step
// failed; the caller then waits as before.
func awaitExit(pid int) error {
	fd, err := openPidfdNonblock(pid)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "pidfd") // non-blocking: in the netpoller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("pidfd %d: %w", pid, err)
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// WNOWAIT: look, leave the zombie to the caller's wait. A live
		// child is EAGAIN on a non-blocking pidfd from Linux 5.10, and
		// si_signo 0 before (waitid(2)): wait for the pidfd to become
		// readable.
		var info unix.Siginfo
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		for werr == unix.EINTR {
			// Not parked again on it: the pidfd becomes readable
			// once, and the netpoller is edge-triggered.
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		}
		switch {
		case werr == unix.EAGAIN:
			werr = nil
			return false
		case werr != nil:
			return true
		}
		// A child found fills si_signo with SIGCHLD; none, zeroes it
		// (waitid(2)).
		return info.Signo == int32(unix.SIGCHLD)
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("waitid P_PIDFD %d WEXITED|WNOHANG|WNOWAIT: %w", pid, err)
	}
	return nil
}
