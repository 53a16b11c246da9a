package nsjail

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	tail := " S 41 42 42 0 -1 4194560 100 0 0 0 7 3 5 2 20 0 1 0 123 4096 100 0\n"
	for _, tc := range []struct {
		name, line string
		want       procStat
		bad        bool
	}{
		{"plain", "42 (python3)" + tail, procStat{ppid: 41, utime: 7, stime: 3, cutime: 5, cstime: 2}, false},
		// The command name is the payload's: prctl(PR_SET_NAME) can put
		// ") 1 2 3" in it to shift the fields of a naive parser.
		{"hostile comm", "42 (x) 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 ()" + tail, procStat{ppid: 41, utime: 7, stime: 3, cutime: 5, cstime: 2}, false},
		{"spaces in comm", "42 (a b c)" + tail, procStat{ppid: 41, utime: 7, stime: 3, cutime: 5, cstime: 2}, false},
		{"truncated", "42 (x) S 41 42 42 0 -1 4194560 100 0 0 0 7 3", procStat{}, true},
		{"no paren", "42 x S 41", procStat{}, true},
		{"negative", "42 (x) S 41 42 42 0 -1 4194560 100 0 0 0 -7 3 5 2\n", procStat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("parseStat(%q) = %+v, want an error", tc.line, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseStat(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
			}
		})
	}
}

// TestCPUMeterCountsTree stands the test process in for the init: a
// grandchild that burns CPU, and the short-lived processes its parent
// reaps, must show in the total, with no allocation per poll.
func TestCPUMeterCountsTree(t *testing.T) {
	m, err := openCPUMeter(os.Getpid(), -1)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer m.close()
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err != nil {
		t.Skipf("no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): %v", err)
	}
	before, err := m.read()
	if err != nil {
		t.Fatal(err)
	}
	// A (sh) runs B (sh) in the background and waits; B runs short-lived
	// `true`s, then burns in a loop, then sleeps.
	cmd := exec.Command("/bin/sh", "-c", `sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 30' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	var r cpuReading
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if r, err = m.read(); err != nil {
			t.Fatal(err)
		}
		if r.total-before.total >= 150*time.Millisecond && r.procs >= 3 {
			break
		}
	}
	if r.total-before.total < 150*time.Millisecond || r.procs < 3 {
		t.Fatalf("the tree burnt for a while but the meter read %v over %d processes (before: %v)", r.total, r.procs, before.total)
	}
	if r.capped {
		t.Errorf("a three-process tree capped the walk")
	}
	if n := testing.AllocsPerRun(20, func() { m.read() }); n != 0 {
		t.Errorf("a poll allocates %v times, want 0", n)
	}
}

// BenchmarkCPUMeterRead measures one poll over a tree of 200 sleeping
// processes (the cost per process bounds a poll at cpuWalkMax of them).
func BenchmarkCPUMeterRead(b *testing.B) {
	cmd := exec.Command("/bin/sh", "-c", `for i in $(seq 200); do sleep 60 & done; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Skipf("no /bin/sh: %v", err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	time.Sleep(time.Second)
	m, err := openCPUMeter(os.Getpid(), -1)
	if err != nil {
		b.Skip(err)
	}
	defer m.close()
	r, _ := m.read()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.read()
	}
	b.ReportMetric(float64(r.procs), "procs")
}

// TestCPUMeterCapped: past cpuWalkMax processes a poll stops, says so,
// and still returns the reaped total, in bounded time.
func TestCPUMeterCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns over a thousand processes")
	}
	m, err := openCPUMeter(os.Getpid(), -1)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer m.close()
	cmd := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt "+strconv.Itoa(cpuWalkMax+50)+" ]; do sleep 60 & i=$((i+1)); done; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		r, err := m.read()
		if err != nil {
			t.Fatal(err)
		}
		if r.capped {
			if r.procs > cpuWalkMax {
				t.Errorf("a capped poll read %d processes, past the cap of %d", r.procs, cpuWalkMax)
			}
			t.Logf("capped poll: %d processes in %v", r.procs, time.Since(start))
			return
		}
	}
	t.Fatalf("%d processes never capped the walk", cpuWalkMax+50)
}

// TestTaskClockSeesAutoreaped: the task clock counts what no cutime does,
// the children of a process that ignores SIGCHLD (reaped by the kernel,
// never waited for), and system time; it leaves out the thread it is
// attached to, which never execs.
func TestTaskClockSeesAutoreaped(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, err := openTaskClock(unix.Gettid())
	if err != nil {
		t.Skipf("no perf task clock here (kernel.perf_event_paranoid, CONFIG_PERF_EVENTS): %v", err)
	}
	defer unix.Close(fd)
	m := &cpuMeter{clock: fd}
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	if c, ok := m.readTaskClock(); !ok || c > 0 {
		t.Fatalf("the clock counted its own thread before any exec: %v, %v", c, ok)
	}
	// Forty children of 10 ms each, never waited for, and 200 ms of
	// system time reading /dev/zero.
	cmd := exec.Command(py, "-c", `
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for _ in range(40):
    if os.fork() == 0:
        end = time.process_time() + 0.01
        while time.process_time() < end:
            pass
        os._exit(0)
time.sleep(0.5)
f = open("/dev/zero", "rb", buffering=0)
end = time.process_time() + 0.2
while time.process_time() < end:
    f.read(1 << 20)
`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	c, ok := m.readTaskClock()
	if !ok || c < 550*time.Millisecond {
		t.Errorf("task clock %v (%v), want at least 0.55 s: 0.4 s of autoreaped children and 0.2 s reading /dev/zero", c, ok)
	}
	t.Logf("task clock %v", c)
}

// TestCPUTotalInitAlreadyGone: a fast payload's init can report and exit
// before the supervisor reads "started"; starting the poll then finds no
// /proc/<init>. That is the end of the run, not a setup error (CI saw
// "poll the CPU time total: open /proc/N: no such file" as exit 125).
func TestCPUTotalInitAlreadyGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{job: &Job{}, res: &Result{Limits: map[string]LimitInfo{}}, attached: make(chan struct{}), cpuClock: -1}
	close(s.attached)
	stop := make(chan struct{})
	defer close(stop)
	over, err := s.watchCPUTotal(cmd.Process.Pid, time.Second, stop)
	if err != nil || over != nil {
		t.Fatalf("watchCPUTotal of a reaped init (pid %d): %v, %v; want no poll and no error", cmd.Process.Pid, over, err)
	}
}
