//go:build integration

package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blockedWaits lists the threads of process pid that sit in a wait for a
// child that blocks: waitid(2) or wait4(2) without WNOHANG, read from
// /proc/PID/task/TID/syscall (the number, then the arguments in hex;
// "running" or "-1 ..." outside a system call: proc(5)).
func blockedWaits(pid int) []string {
	var found []string
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/task", pid), task.Name(), "syscall"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 5 {
			continue
		}
		nr, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		arg := func(i int) uint64 {
			v, _ := strconv.ParseUint(strings.TrimPrefix(f[1+i], "0x"), 16, 64)
			return v
		}
		switch {
		case nr == unix.SYS_WAITID && arg(3)&unix.WNOHANG == 0:
			found = append(found, fmt.Sprintf("thread %s in waitid(%d, %d, ..., %#x)", task.Name(), arg(0), arg(1), arg(3)))
		case nr == unix.SYS_WAIT4 && arg(2)&unix.WNOHANG == 0:
			found = append(found, fmt.Sprintf("thread %s in wait4(%d, ..., %#x)", task.Name(), int64(arg(0)), arg(2)))
		}
	}
	return found
}

// argv0 is the first word of pid's command line, "" if it is gone.
func argv0(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	first, _, _ := bytes.Cut(b, []byte{0})
	return string(first)
}

// TestReapWaitsInTheNetpoller: while the payload runs, no thread of the
// supervisor is blocked in waitid or wait4 for the init (issue 13, the
// tail): the reap waits for the init's pidfd to become readable in Go's
// netpoller (nsjail.awaitExit), holding no P. A thread in a blocking
// waitid keeps its P until sysmon retakes it, and with the one P of an
// unprivileged exec the init's status lines, the report and the outputs'
// EOFs waited for that.
func TestReapWaitsInTheNetpoller(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		m := marker(t)
		defer killMarked(m)
		cmd := r.command("exec", "--profile", "strict", "--debug-timings", "--", "/usr/bin/python3", "-S", "-c", "import time; time.sleep(3)", m)
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The marker is in the argv of sbx itself (run straight, by
		// setpriv's exec, or by a wrapper's: SBX_TEST_WRAP) and of the
		// payload, which runs once python3 shows up with it.
		var sbxPid int
		payloadRunning := func() bool {
			running := false
			for _, pid := range processesWith(m) {
				switch argv0(pid) {
				case sbxBin:
					sbxPid = pid
				case "/usr/bin/python3":
					running = true
				}
			}
			return running && sbxPid != 0
		}
		deadline := time.Now().Add(30 * time.Second)
		for !payloadRunning() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !payloadRunning() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the payload never started (sbx pid %d): %s", sbxPid, se.String())
		}
		// The supervisor waits for the init all along; look for ~0.5 s,
		// well within the payload's 3.
		var blocked []string
		for i := 0; i < 25 && len(blocked) == 0; i++ {
			blocked = blockedWaits(sbxPid)
			time.Sleep(20 * time.Millisecond)
		}
		stillRunning := payloadRunning()
		err := cmd.Wait()
		if err != nil {
			t.Fatalf("sbx exec: %v\n%s", err, se.String())
		}
		if !stillRunning {
			t.Fatalf("the payload ended before the threads were sampled: the check saw nothing of the wait\n%s", se.String())
		}
		if len(blocked) > 0 {
			t.Errorf("the supervisor blocks in a wait for the init: %v", blocked)
		}
		if strings.Contains(se.String(), "waitid blocks instead") {
			t.Errorf("the pidfd's wait fell back to a blocking waitid:\n%s", se.String())
		}
	})
}

// TestInitClosesItsPipesBeforeExit: the init's last act before
// exit_group is to close its ends of the supervisor's pipes (status,
// outputs, control), so the supervisor's EOFs do not wait for its exit:
// the kernel releases a dying task's files only after exit_mm, and the
// final fput of a pipe runs as task work after exit_task_namespaces, the
// mount namespace's teardown (kernel/exit.c, do_exit; issue 13, the
// tail). strace -f follows the supervisor into the init (the main
// thread's calls, one file per thread with -ff).
func TestInitClosesItsPipesBeforeExit(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		msg := "strace is not installed: it shows the init's last system calls"
		if os.Getenv("SBX_MUST_WORK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	forEach(t, func(t *testing.T, r runner) {
		dir := t.TempDir()
		base := r.command("exec", "--profile", "strict", "--", "/usr/bin/python3", "-S", "-c", "pass")
		cmd := exec.Command(strace, append([]string{"-f", "-ff", "-qq", "-e", "trace=close,exit_group,execve,write", "-e", "signal=none", "-o", filepath.Join(dir, "st"), base.Path}, base.Args[1:]...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("strace sbx exec: %v\n%s", err, out)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "st.*"))
		var initCalls []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// The init is the process sbx started from the sbx-init
			// memfd (initbin).
			if strings.Contains(string(b), `execve("/proc/self/fd/`) {
				initCalls = strings.Split(strings.TrimSpace(string(b)), "\n")
				break
			}
		}
		if len(initCalls) == 0 {
			t.Fatalf("no init among the traced threads (%d files)", len(files))
		}
		end := len(initCalls) - 1
		if !strings.HasPrefix(initCalls[end], "exit_group(") {
			t.Fatalf("the init's main thread did not end in exit_group: %q", initCalls[end])
		}
		// The closes just before exit_group.
		closed := map[int]bool{}
		for i := end - 1; i >= 0 && strings.HasPrefix(initCalls[i], "close("); i-- {
			var fd, ret int
			if _, err := fmt.Sscanf(initCalls[i], "close(%d) = %d", &fd, &ret); err == nil && ret == 0 {
				closed[fd] = true
			}
		}
		for _, fd := range []int{0, 1, 2, 3, 4} {
			if !closed[fd] {
				t.Errorf("the init does not close fd %d right before exit_group; its last calls:\n%s", fd, strings.Join(initCalls[max(0, end-12):], "\n"))
				break
			}
		}
	})
}
