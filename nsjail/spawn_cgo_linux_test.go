//go:build cgo && !sbx_init_only && linux && amd64

package nsjail

import (
	"fmt"

	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// spawnTestCmd is an initCmd-shaped command: the init's namespaces, maps
// of the caller's ids, Pdeathsig and Setsid.
func spawnTestCmd(t *testing.T, path string, args ...string) *exec.Cmd {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return &exec.Cmd{
		Path: path, Args: append([]string{path}, args...), Env: []string{},
		Stdin: null, Stdout: null, Stderr: null,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
			Setsid:      true,
		},
	}
}

// noChildLeft fails if the test process has a child, reaped or not.
func noChildLeft(t *testing.T) {
	t.Helper()
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|syscall.WALL, nil); !errors.Is(err, syscall.ECHILD) {
		t.Errorf("a child is left: wait4 = %d, %v", pid, err)
	}
}

func skipWithoutUserNS(t *testing.T) {
	t.Helper()
	cmd := spawnTestCmd(t, "/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no user namespaces here (os/exec's clone fails: %v)", err)
	}
}

func TestSpawnInitRunsAndWaits(t *testing.T) {
	skipWithoutUserNS(t)
	cmd := spawnTestCmd(t, "/bin/sh", "-c", "exit 7")
	if err := spawnInit(cmd); err != nil {
		t.Fatalf("spawnInit: %v", err)
	}
	err := waitSpawned(cmd)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("wait: %v (state %v), want exit 7", err, cmd.ProcessState)
	}
	noChildLeft(t)
}

func TestSpawnInitExecErrorNamesStep(t *testing.T) {
	skipWithoutUserNS(t)
	cmd := spawnTestCmd(t, "/nonexistent/sbx-init")
	err := spawnInit(cmd)
	var se *SpawnError
	if !errors.As(err, &se) || se.Step != "execve" || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("spawnInit = %v, want execve ... ENOENT", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent/sbx-init") {
		t.Errorf("%q does not name the path", err)
	}
	noChildLeft(t)
}

func TestSpawnInitMapErrorNamesStep(t *testing.T) {
	skipWithoutUserNS(t)
	cmd := spawnTestCmd(t, "/bin/true")
	cmd.SysProcAttr.UidMappings[0].Size = 0 // the kernel refuses a 0-long range
	err := spawnInit(cmd)
	var se *SpawnError
	if !errors.As(err, &se) || !strings.Contains(se.Step, "uid_map") || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("spawnInit = %v, want write /proc/PID/uid_map ... EINVAL", err)
	}
	noChildLeft(t)
}

func TestSpawnInitLeavesCgroupFDToOSExec(t *testing.T) {
	cmd := spawnTestCmd(t, "/bin/true")
	cmd.SysProcAttr.UseCgroupFD = true
	if err := spawnInit(cmd); !errors.Is(err, errSpawnUnsupported) {
		t.Fatalf("spawnInit with UseCgroupFD = %v, want errSpawnUnsupported", err)
	}
}

// TestSpawnInitKeepsThePathFD execs /proc/self/fd/100, as the init's
// memfd is exec'd (initbin's fdFloor), with the passed files ending at
// each fd just below it: the child's moves of the report pipe and of the
// files out of the way must never land on 100. A busy sbx serve had its
// fds there, the move replaced the image with the report pipe, and the
// run failed "execve /proc/self/fd/100: permission denied".
func TestSpawnInitKeepsThePathFD(t *testing.T) {
	skipWithoutUserNS(t)
	const pathFD = 100
	exe, err := os.Open("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	if err := syscall.Dup3(int(exe.Fd()), pathFD, syscall.O_CLOEXEC); err != nil {
		t.Fatalf("dup3 onto %d: %v", pathFD, err)
	}
	defer syscall.Close(pathFD)
	ran := 0
	for high := pathFD - 6; high < pathFD; high++ {
		if _, err := unix.FcntlInt(uintptr(high), unix.F_GETFD, 0); err == nil {
			continue // the test process has it open already
		}
		null, err := os.OpenFile(os.DevNull, os.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Dup3(int(null.Fd()), high, syscall.O_CLOEXEC); err != nil {
			t.Fatalf("dup3 onto %d: %v", high, err)
		}
		null.Close()
		f := os.NewFile(uintptr(high), "high")
		cmd := spawnTestCmd(t, fmt.Sprintf("/proc/self/fd/%d", pathFD))
		cmd.ExtraFiles = []*os.File{f, f}
		err = spawnInit(cmd)
		if err == nil {
			err = waitSpawned(cmd)
		}
		f.Close()
		if err != nil {
			t.Errorf("the passed files ending at fd %d: %v", high, err)
		}
		ran++
		noChildLeft(t)
	}
	if ran == 0 {
		t.Fatalf("fds %d..%d all taken in the test process", pathFD-6, pathFD-1)
	}
}

// TestStartWithOSExecKeepsThePathFD is TestSpawnInitKeepsThePathFD for
// the init's other start, os/exec's (CLONE_INTO_CGROUP on cgroup v2, a
// build without cgo): Go's child moves its sync pipe to one past the
// highest passed fd, which was the memfd's 100 when they ended at 99, and
// the execve failed EACCES. Here for every end from 94 to 99.
func TestStartWithOSExecKeepsThePathFD(t *testing.T) {
	skipWithoutUserNS(t)
	const pathFD = 100
	exe, err := os.Open("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	if err := syscall.Dup3(int(exe.Fd()), pathFD, syscall.O_CLOEXEC); err != nil {
		t.Fatalf("dup3 onto %d: %v", pathFD, err)
	}
	defer syscall.Close(pathFD)
	ran := 0
	for high := pathFD - 6; high < pathFD; high++ {
		if _, err := unix.FcntlInt(uintptr(high), unix.F_GETFD, 0); err == nil {
			continue // the test process has it open already
		}
		null, err := os.OpenFile(os.DevNull, os.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Dup3(int(null.Fd()), high, syscall.O_CLOEXEC); err != nil {
			t.Fatalf("dup3 onto %d: %v", high, err)
		}
		null.Close()
		f := os.NewFile(uintptr(high), "high")
		path := fmt.Sprintf("/proc/self/fd/%d", pathFD)
		cmd := spawnTestCmd(t, path)
		cmd.ExtraFiles = []*os.File{f, f}
		err = startWithOSExec(cmd)
		if err == nil {
			err = cmd.Wait()
		}
		f.Close()
		if err != nil {
			t.Errorf("the passed files ending at fd %d: %v", high, err)
		}
		if cmd.Path != path {
			t.Errorf("cmd.Path is %q after the start, want %q back", cmd.Path, path)
		}
		ran++
		noChildLeft(t)
	}
	if ran == 0 {
		t.Fatalf("fds %d..%d all taken in the test process", pathFD-6, pathFD-1)
	}
}

// TestOSExecMoveRange: the fds Go's child may move onto, from one past
// the highest passed fd.
func TestOSExecMoveRange(t *testing.T) {
	cmd := spawnTestCmd(t, "/bin/true")
	in := cmd.Stdin.(*os.File)
	lo, hi, ok := osExecMoveRange(cmd)
	if want := max(int(in.Fd()), 3) + 1; !ok || lo != want || hi != want+4 {
		t.Errorf("range %d..%d (%v), want %d..%d", lo, hi, ok, want, want+4)
	}
	cmd.Stdout = &strings.Builder{}
	if _, _, ok := osExecMoveRange(cmd); ok {
		t.Error("stdout os/exec pipes itself: its fd is not known before Start, want !ok")
	}
}
