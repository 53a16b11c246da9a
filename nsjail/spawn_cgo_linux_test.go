//go:build cgo && !sbx_init_only && linux && amd64

package nsjail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sbx-sandbox/sbx/cgroup"
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

// spawnTestCgroup is a v2 cgroup dir for CLONE_INTO_CGROUP and its fd.
// On pure v2 (make vmtest's guest) it is a new cgroup of the test's own
// (cgroup.New), so a child born there is somewhere a plain clone would
// not put it. Elsewhere (the hybrid dev host) it is the test process's
// own v2 cgroup, where a clone puts the child anyway: that still runs
// clone3 and sbx_clone3_vm's child on its stack, but only the VM's run
// tells the cgroup apart. own reports which.
func spawnTestCgroup(t *testing.T) (dir string, fd int, own bool) {
	t.Helper()
	if cgroup.PureV2() {
		g, err := cgroup.New(fmt.Sprintf("spawntest-%d", os.Getpid()), cgroup.Limits{Pids: 64})
		if err != nil {
			t.Skipf("no cgroup can be made here: %v", err)
		}
		t.Cleanup(func() {
			if err := g.Destroy(); err != nil {
				t.Errorf("destroy the test's cgroup: %v", err)
			}
		})
		fd, ok := g.FD()
		if !ok {
			t.Fatalf("pure v2, but the cgroup %v has no v2 fd", g.Paths())
		}
		return g.Paths()[0], fd, false
	}
	mnt, rel := v2MountOf(t, os.Getpid())
	dir = mnt + rel
	if err := unix.Faccessat(unix.AT_FDCWD, dir+"/cgroup.procs", unix.W_OK, unix.AT_EACCESS); err != nil {
		t.Skipf("the test's own v2 cgroup %s: cgroup.procs not writable (%v), which CLONE_INTO_CGROUP needs", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("open the test's own v2 cgroup %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	t.Logf("not pure cgroup v2: the child is born in the test's own v2 cgroup %s (the real check runs in make vmtest's guest)", dir)
	return dir, fd, true
}

// v2MountOf is where the cgroup2 hierarchy is mounted and pid's cgroup
// in it (the "0::" line of /proc/PID/cgroup); it skips without one.
func v2MountOf(t *testing.T, pid int) (mnt, rel string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		_, after, ok := strings.Cut(line, " - ")
		if ok && len(f) > 4 && f[3] == "/" && strings.HasPrefix(after, "cgroup2 ") {
			mnt = f[4]
			break
		}
	}
	if mnt == "" {
		t.Skip("no cgroup2 hierarchy mounted here (at its root)")
	}
	return mnt, cgroupLine(t, pid)
}

// cgroupLine is pid's v2 cgroup, the "0::" line of /proc/PID/cgroup.
func cgroupLine(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return rel
		}
	}
	t.Fatalf("/proc/%d/cgroup has no v2 line:\n%s", pid, b)
	return ""
}

// TestSpawnInitIntoCgroupFD: with UseCgroupFD the init is cloned by
// sbx_spawn's clone3 CLONE_INTO_CGROUP (no full fork of the supervisor;
// issue 13), born in that cgroup, and runs and is waited for as before.
func TestSpawnInitIntoCgroupFD(t *testing.T) {
	skipWithoutUserNS(t)
	dir, fd, own := spawnTestCgroup(t)
	mnt, _ := v2MountOf(t, os.Getpid())
	if !own && mnt+cgroupLine(t, os.Getpid()) == dir {
		t.Fatalf("the test process is in %s itself", dir)
	}
	cmd := spawnTestCmd(t, "/bin/sleep", "60")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	err := spawnInit(cmd)
	if errors.Is(err, errSpawnUnsupported) && (errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG)) {
		t.Skipf("the kernel has no clone3 CLONE_INTO_CGROUP (Linux 5.7): %v", err)
	}
	if err != nil {
		t.Fatalf("spawnInit into %s: %v", dir, err)
	}
	pid := cmd.Process.Pid
	if got := mnt + cgroupLine(t, pid); got != dir {
		t.Errorf("the child %d is in %s, want %s", pid, got, dir)
	}
	cmd.Process.Kill()
	err = waitSpawned(cmd)
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Errorf("wait: %v (state %v), want killed by SIGKILL", err, cmd.ProcessState)
	}
	noChildLeft(t)
}

// TestSpawnInitCgroupFDErrorNamesStep: an fd that is no v2 cgroup (a
// plain directory) fails the clone3 itself, EBADF
// (cgroup_css_set_fork), as a SpawnError naming clone3, its flags and
// the fd; nothing was cloned and nothing falls back to a clone outside.
func TestSpawnInitCgroupFDErrorNamesStep(t *testing.T) {
	skipWithoutUserNS(t)
	d, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := spawnTestCmd(t, "/bin/true")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(d.Fd())
	err = spawnInit(cmd)
	if errors.Is(err, errSpawnUnsupported) && (errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG)) {
		t.Skipf("the kernel has no clone3 CLONE_INTO_CGROUP (Linux 5.7): %v", err)
	}
	var se *SpawnError
	if !errors.As(err, &se) || se.Step != "clone3" || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("spawnInit = %v, want clone3 ... EBADF", err)
	}
	if want := fmt.Sprintf("CLONE_INTO_CGROUP cgroup fd %d", d.Fd()); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "CLONE_NEWUSER") {
		t.Errorf("%q does not name the flags and %q", err, want)
	}
	noChildLeft(t)
}

// TestSpawnInitWithoutClone3FallsBack: a kernel without clone3 (ENOSYS:
// < 5.3, or a container's seccomp filter) or without its cgroup field
// (E2BIG: < 5.7) gives errSpawnUnsupported, so that sandbox.go runs
// cmd.Start, which keeps UseCgroupFD: the init is never cloned outside
// its cgroup instead. The kernel's answer is faked by a seccomp filter on
// one locked thread, which then ends with its goroutine (the runtime
// never clones from a locked thread: newm's template thread).
func TestSpawnInitWithoutClone3FallsBack(t *testing.T) {
	skipWithoutUserNS(t)
	for _, errno := range []syscall.Errno{syscall.ENOSYS, syscall.E2BIG} {
		t.Run(errno.Error(), func(t *testing.T) {
			d, err := os.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			cmd := spawnTestCmd(t, "/bin/true")
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(d.Fd())
			done := make(chan error, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread keeps the filter
				if err := failClone3OnThisThread(errno); err != nil {
					done <- fmt.Errorf("seccomp filter: %w", err)
					return
				}
				done <- spawnInit(cmd)
			}()
			err = <-done
			if !errors.Is(err, errSpawnUnsupported) || !errors.Is(err, errno) {
				t.Fatalf("spawnInit with clone3 %v = %v, want errSpawnUnsupported naming it", errno, err)
			}
			noChildLeft(t)
		})
	}
}

// failClone3OnThisThread makes clone3 fail with errno on the calling
// thread only (no SECCOMP_FILTER_FLAG_TSYNC; PR_SET_NO_NEW_PRIVS is the
// thread's too).
func failClone3OnThisThread(errno syscall.Errno) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.AUDIT_ARCH_X86_64},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_CLONE3},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0)
}

// TestSpawnInitKeepsThePathFD execs /proc/self/fd/100, as the init's
// memfd is exec'd (initbin's fdFloor), with the passed files ending at
// each fd just below it: the child's moves of the report pipe and of the
// files out of the way must never land on 100. A busy sbx serve had its
// fds there, the move replaced the image with the report pipe, and the
// run failed "execve /proc/self/fd/100: permission denied".
func TestSpawnInitKeepsThePathFD(t *testing.T) {
	startsKeepingThePathFD(t, func(cmd *exec.Cmd) error {
		if err := spawnInit(cmd); err != nil {
			return err
		}
		return waitSpawned(cmd)
	})
}

// TestStartWithOSExecKeepsThePathFD is TestSpawnInitKeepsThePathFD for
// the init's other start, os/exec's (CLONE_INTO_CGROUP on cgroup v2, a
// build without cgo): Go's child moves its sync pipe to one past the
// highest passed fd, which was the memfd's 100 when they ended at 99, and
// the execve failed EACCES. cmd.Path must be the caller's again after.
func TestStartWithOSExecKeepsThePathFD(t *testing.T) {
	startsKeepingThePathFD(t, func(cmd *exec.Cmd) error {
		path := cmd.Path
		err := startWithOSExec(cmd)
		if cmd.Path != path {
			t.Errorf("cmd.Path is %q after the start, want %q back", cmd.Path, path)
		}
		if err != nil {
			return err
		}
		return cmd.Wait()
	})
}

// startsKeepingThePathFD runs /bin/true as /proc/self/fd/100 through run
// (a start and its wait) with the passed files ending at each of the fds
// 94..99 that the test process does not hold.
func startsKeepingThePathFD(t *testing.T, run func(*exec.Cmd) error) {
	t.Helper()
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
		err = run(cmd)
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
