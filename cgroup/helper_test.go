package cgroup

// Helper processes for the tests: the test binary re-executes itself with
// SBX_CGROUP_TEST_HELPER=<mode>, and TestMain runs the mode instead of the
// tests. Helpers that do work wait for one byte on stdin first ("go"), so
// that the test can place them in the cgroup (Attach on v1) before they
// start: the supervisor's order too.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const helperEnv = "SBX_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func waitGo() {
	var b [1]byte
	if _, err := os.Stdin.Read(b[:]); err != nil {
		fmt.Fprintln(os.Stderr, "helper: no go byte:", err)
		os.Exit(3)
	}
}

func runHelper(mode string) {
	switch mode {
	case "sleep": // until stdin is closed
		io.Copy(io.Discard, os.Stdin)
	case "hog": // touch 1 GiB, one page at a time
		waitGo()
		b := make([]byte, 1<<30)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("survived")
	case "busy": // $THREADS threads spinning for $WALL of wall-clock time
		waitGo()
		// The CPU spent so far (the start, before a v1 attach), for
		// TestCPUUsageTracksBusy: "before NS".
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		fmt.Println("before", ru.Utime.Nano()+ru.Stime.Nano())
		n, _ := strconv.Atoi(os.Getenv("THREADS"))
		wall, _ := time.ParseDuration(os.Getenv("WALL"))
		end := time.Now().Add(wall)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				x := 0
				for time.Now().Before(end) {
					for i := 0; i < 100000; i++ {
						x += i
					}
				}
				_ = x
			}()
		}
		wg.Wait()
		fmt.Println("done")
	case "tree": // a tree of processes that all ignore SIGTERM
		signal.Ignore(syscall.SIGTERM)
		if os.Getenv("TREE_CHILD") == "" {
			// Fork only once placed: on v1 a child forked before the
			// parent's Attach stays outside the cgroup.
			waitGo()
		}
		depth, _ := strconv.Atoi(os.Getenv("DEPTH"))
		if depth > 0 {
			for range 3 {
				c := exec.Command("/proc/self/exe", "-test.run=^$")
				c.Env = append(os.Environ(), fmt.Sprintf("DEPTH=%d", depth-1), "TREE_CHILD=1")
				c.Stdout = os.Stdout
				if err := c.Start(); err != nil {
					fmt.Println("error", err)
					os.Exit(1)
				}
			}
		}
		fmt.Println(os.Getpid())
		for {
			time.Sleep(time.Hour)
		}
	case "work": // the supervisor's init stand-in for the attach measurement
		waitGo()
		t0 := time.Now()
		doWork(os.Getenv("WORK"))
		fmt.Println("done", time.Since(t0).Microseconds())
		io.Copy(io.Discard, os.Stdin)
	case "newgroup": // New as a separate sbx process would call it
		if w, err := time.ParseDuration(os.Getenv("ENABLE_WAIT")); err == nil {
			enableWait = w
		}
		waitGo()
		var child *exec.Cmd
		if d := os.Getenv("CHILD_SLEEP"); d != "" {
			// A child of this "sbx" in the base, as the memfd's copy
			// process is: New must wait for it to leave.
			child = exec.Command("/bin/sleep", d)
			if err := child.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "helper: start the child:", err)
				os.Exit(5)
			}
		}
		rep := newgroupReport{Pid: os.Getpid()}
		t0 := time.Now()
		g, err := New("leaf-"+strconv.Itoa(os.Getpid()), Limits{MemoryBytes: 256 << 20, Pids: 100})
		if child != nil {
			child.Wait()
		}
		if err != nil {
			rep.Err = err.Error()
		} else {
			rep.Mode, rep.Paths = g.Mode(), g.Paths()
			rep.Enforced = map[string]Mode{}
			for k, v := range g.Enforced() {
				rep.Enforced[k] = v
			}
			rep.Unenforced = map[string]string{}
			for k, v := range g.Unenforced() {
				rep.Unenforced[k] = v.Error()
			}
		}
		rep.Took = time.Since(t0)
		own, _ := os.ReadFile("/proc/self/cgroup")
		rep.OwnCgroup = strings.TrimSpace(string(own))
		json.NewEncoder(os.Stdout).Encode(rep)
		io.Copy(io.Discard, os.Stdin)
		if g != nil {
			if err := g.Destroy(); err != nil {
				fmt.Fprintln(os.Stderr, "helper: destroy:", err)
				os.Exit(4)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		os.Exit(2)
	}
}

type newgroupReport struct {
	Pid        int
	Mode       Mode
	Paths      []string
	Enforced   map[string]Mode
	Unenforced map[string]string
	OwnCgroup  string
	Err        string
	Took       time.Duration
}

// doWork is CPU-light, syscall-heavy work with some process creation,
// roughly what the init does before the payload (mounts are syscalls;
// the Go runtime and the payload spawn create threads and processes).
func doWork(kind string) {
	switch kind {
	case "syscalls":
		for range 2000 {
			fd, err := unix.Open("/proc/self/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
		}
	case "forks":
		for range 5 {
			exec.Command("/bin/true").Run()
		}
	}
}

// helper is a started helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  chan struct{}
	err   error // of Wait, valid after done
}

// startHelper starts the test binary in a helper mode, inside g when g is
// not nil (born inside through CLONE_INTO_CGROUP on v2, attached before
// "go" on v1). The helper is killed and reaped when the test ends.
func startHelper(t testing.TB, g *Group, mode string, env ...string) *helper {
	t.Helper()
	return startCmd(t, g, exec.Command(testExe(t), "-test.run=^$"), append(env, helperEnv+"="+mode)...)
}

// startHelperInFD starts a helper born in the cgroup directory fd (v2).
func startHelperInFD(t testing.TB, fd int, mode string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(testExe(t), "-test.run=^$")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	return startCmd(t, nil, cmd, append(env, helperEnv+"="+mode)...)
}

func startCmd(t testing.TB, g *Group, cmd *exec.Cmd, env ...string) *helper {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	useFD := cmd.SysProcAttr.UseCgroupFD
	if g != nil {
		if fd, ok := g.FD(); ok {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD, useFD = true, fd, true
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A pipe of our own rather than StdoutPipe: Wait closes that one, and
	// the output must stay readable after the helper has exited.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(r), done: make(chan struct{})}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() { h.kill() })
	if g != nil && !useFD {
		if err := g.Attach(cmd.Process.Pid); err != nil {
			t.Fatalf("attach %d: %v", cmd.Process.Pid, err)
		}
	}
	return h
}

func (h *helper) start(t testing.TB) {
	t.Helper()
	if _, err := h.stdin.Write([]byte{'g'}); err != nil {
		t.Fatalf("write go to helper %d: %v", h.cmd.Process.Pid, err)
	}
}

func (h *helper) kill() {
	select {
	case <-h.done:
		return
	default:
	}
	h.cmd.Process.Kill()
	h.stdin.Close()
	<-h.done
}

// wait waits for the helper to exit and returns its wait status.
func (h *helper) wait(t testing.TB, timeout time.Duration) syscall.WaitStatus {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(timeout):
		t.Fatalf("helper %d (%v) still running after %v", h.cmd.Process.Pid, h.cmd.Args, timeout)
	}
	return h.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// line reads one line of the helper's stdout, with a timeout.
func (h *helper) line(t testing.TB, timeout time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, err := h.out.ReadString('\n')
		if err != nil {
			s = "<" + err.Error() + ">"
		}
		ch <- strings.TrimSpace(s)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(timeout):
		t.Fatalf("no line from helper %d within %v", h.cmd.Process.Pid, timeout)
		return ""
	}
}

func testExe(t testing.TB) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
