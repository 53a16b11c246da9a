package cgroup

// The tests below create real cgroups and run real processes in them. Where
// they ran, and the exact commands (from /work/main/cgroup):
//
//   cgroup v1, root, on the hybrid dev machine:
//     go test -count=1 -v .
//     go test -race -count=1 .
//   unprivileged on the dev machine (no delegation: New must say ErrUnavailable):
//     go test -c -o /tmp/cg.test . &&
//     setpriv --reuid=65534 --regid=65534 --clear-groups env SBX_CGROUP_WANT=none /tmp/cg.test -test.v
//   cgroup v2 in the VM (the binary is built outside /tmp so that -r can share it):
//     go test -c -o /var/tmp/sbx-cgtest/cg.test .
//   - root, in the root cgroup:
//     /work/shared/vmtest/run-in-vm.sh -e SBX_CGROUP_WANT=cgroup2 /var/tmp/sbx-cgtest/cg.test -test.v
//   - uid 1000, delegated the way systemd's Delegate=yes does it (the test's own
//     cgroup has the controllers and holds the test process, so New must move
//     it into a leaf first):
//     /work/shared/vmtest/run-in-vm.sh -u 1000 -r /var/tmp/sbx-cgtest -e SBX_CGROUP_WANT=cgroup2 \
//         testdata/vm-delegate.sh /var/tmp/sbx-cgtest/cg.test -test.v
//   - the same, plus what is left after the test process exits, and the next
//     run's cleanup of it:
//     /work/shared/vmtest/run-in-vm.sh -u 1000 -r /var/tmp/sbx-cgtest -e SBX_CGROUP_WANT=cgroup2 \
//         testdata/vm-delegate.sh testdata/vm-leftovers.sh /var/tmp/sbx-cgtest/cg.test
//   - uid 1000 as run-in-vm.sh -u leaves it (the own cgroup is writable but no
//     controller is enabled for it, and sbx must not write its parent): a
//     Group with CPU accounting and cgroup.kill, no limits:
//     /work/shared/vmtest/run-in-vm.sh -u 1000 -e SBX_CGROUP_WANT=cgroup2 -e SBX_CGROUP_WANT_KINDS= \
//         /var/tmp/sbx-cgtest/cg.test -test.v
//
// What each environment must give is stated, not guessed from what the code
// finds: SBX_CGROUP_WANT (cgroup1, cgroup2, none; default: cgroup2 or
// cgroup1 from /sys/fs/cgroup's type for root, none for other users) and
// SBX_CGROUP_WANT_KINDS (limit kinds New must enforce; default all three
// unless none). A test whose limit kind is not expected skips, saying so.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type expectation struct {
	mode  Mode
	kinds []string
}

var (
	wantOnce sync.Once
	wanted   expectation
	wantErr  error
)

func want(t testing.TB) expectation {
	t.Helper()
	wantOnce.Do(func() {
		switch m := os.Getenv("SBX_CGROUP_WANT"); Mode(m) {
		case ModeV1, ModeV2, ModeNone:
			wanted.mode = Mode(m)
		case "":
			if os.Geteuid() != 0 {
				wanted.mode = ModeNone
				break
			}
			var st unix.Statfs_t
			if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
				wantErr = err
				return
			}
			wanted.mode = ModeV1
			if st.Type == unix.CGROUP2_SUPER_MAGIC {
				wanted.mode = ModeV2
			}
		default:
			wantErr = fmt.Errorf("SBX_CGROUP_WANT=%q: want cgroup1, cgroup2 or none", m)
			return
		}
		kinds, set := os.LookupEnv("SBX_CGROUP_WANT_KINDS")
		if !set && wanted.mode != ModeNone {
			kinds = "memory,pids,cpus"
		}
		for _, k := range strings.Split(kinds, ",") {
			if k = strings.TrimSpace(k); k != "" {
				wanted.kinds = append(wanted.kinds, k)
			}
		}
	})
	if wantErr != nil {
		t.Fatal(wantErr)
	}
	return wanted
}

func requireKind(t *testing.T, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if !slices.Contains(want(t).kinds, k) {
			t.Skipf("the %s limit is not expected to be enforced here (mode %s, SBX_CGROUP_WANT_KINDS=%q)", k, want(t).mode, strings.Join(want(t).kinds, ","))
		}
	}
}

// mustEnforce stops a test before it runs a bomb that the group would
// not contain (a fork loop without pids.max runs until the test times out,
// and a timed-out test binary exits without its cleanups).
func mustEnforce(t *testing.T, g *Group, kind string) {
	t.Helper()
	if m, ok := g.Enforced()[kind]; !ok {
		t.Fatalf("the %s limit is not enforced (%v): not running the payload", kind, g.Unenforced()[kind])
	} else if m != g.Mode() {
		t.Fatalf("Enforced[%s] = %s in a %s group", kind, m, g.Mode())
	}
}

var idSeq int

// newTestGroup creates a Group that the test's cleanup kills and destroys,
// checking that nothing is left of it.
func newTestGroup(t *testing.T, l Limits) *Group {
	t.Helper()
	if want(t).mode == ModeNone {
		t.Skipf("SBX_CGROUP_WANT=none: no cgroup can be created here (TestUnavailable checks that)")
	}
	idSeq++
	id := fmt.Sprintf("test%d-%d", os.Getpid(), idSeq)
	g, err := New(id, l)
	if err != nil {
		t.Fatalf("New(%q, %+v): %v", id, l, err)
	}
	t.Cleanup(func() {
		paths := g.Paths()
		if err := g.Kill(); err != nil && !g.destroyed {
			t.Errorf("cleanup: Kill: %v", err)
		}
		if err := g.Destroy(); err != nil {
			t.Errorf("cleanup: Destroy: %v", err)
		}
		for _, p := range paths {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cleanup: %s still exists after Destroy (%v)", p, err)
			}
		}
	})
	return g
}

func TestProbe(t *testing.T) {
	w := want(t)
	mode, ctls, err := Probe()
	t.Logf("Probe() = %s, %v, %v", mode, ctls, err)
	if mode != w.mode {
		t.Fatalf("Probe mode = %s, want %s (err %v)", mode, w.mode, err)
	}
	if w.mode == ModeNone {
		if !errors.Is(err, ErrUnavailable) || len(ctls) != 0 {
			t.Fatalf("Probe() = %v, %v; want no controllers and ErrUnavailable", ctls, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	need := map[string]string{KindMemory: "memory", KindPids: "pids", KindCPUs: "cpu"}
	for _, k := range w.kinds {
		if !slices.Contains(ctls, need[k]) {
			t.Errorf("Probe controllers %v lack %s", ctls, need[k])
		}
	}
	if w.mode == ModeV1 && len(w.kinds) == 3 {
		for _, c := range []string{"cpuacct", "freezer"} {
			if !slices.Contains(ctls, c) {
				t.Errorf("Probe controllers %v lack %s", ctls, c)
			}
		}
	}
}

// TestUnavailable: unprivileged, outside a delegated cgroup, New must fail
// with ErrUnavailable (the caller falls back to rlimits) and create nothing.
func TestUnavailable(t *testing.T) {
	if want(t).mode != ModeNone {
		t.Skipf("cgroups are expected to be usable here (%s)", want(t).mode)
	}
	id := fmt.Sprintf("unavail%d", os.Getpid())
	g, err := New(id, Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if !errors.Is(err, ErrUnavailable) || g != nil {
		t.Fatalf("New = %v, %v; want nil, ErrUnavailable", g, err)
	}
	t.Logf("New: %v", err)
	out, _ := exec.Command("find", "/sys/fs/cgroup", "-name", "sbx-"+id).Output()
	if len(out) > 0 {
		t.Fatalf("New left %s", out)
	}
	if err := CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
}

// TestNewAppliesLimits: the limit files hold what was asked, Enforced and
// Unenforced say exactly what is enforced, and FD is there on v2 only.
func TestNewAppliesLimits(t *testing.T) {
	w := want(t)
	g := newTestGroup(t, Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if g.Mode() != w.mode {
		t.Fatalf("Mode = %s, want %s", g.Mode(), w.mode)
	}
	enf, unenf := g.Enforced(), g.Unenforced()
	t.Logf("paths %v; enforced %v; unenforced %v", g.Paths(), enf, unenf)
	for _, k := range []string{KindMemory, KindPids, KindCPUs} {
		wantIt := slices.Contains(w.kinds, k)
		if m, ok := enf[k]; ok != wantIt || (ok && m != w.mode) {
			t.Errorf("Enforced[%s] = %q, %v; want enforced=%v by %s", k, m, ok, wantIt, w.mode)
		}
		if why, ok := unenf[k]; ok == wantIt || (ok && why == nil) {
			t.Errorf("Unenforced[%s] = %v, %v; want present=%v with a reason", k, why, ok, !wantIt)
		}
	}
	check := func(controller, file, want string) {
		t.Helper()
		dir, ok := g.dirFor(controller)
		if !ok {
			t.Errorf("no directory for %s", controller)
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Error(err)
			return
		}
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %q, want %q", filepath.Join(dir, file), got, want)
		}
	}
	switch w.mode {
	case ModeV2:
		if _, ok := enf[KindMemory]; ok {
			check("memory", "memory.max", "67108864")
			if _, err := os.Stat(filepath.Join(g.Paths()[0], "memory.swap.max")); err == nil {
				check("memory", "memory.swap.max", "0")
			}
		}
		if _, ok := enf[KindPids]; ok {
			check("pids", "pids.max", "16")
		}
		if _, ok := enf[KindCPUs]; ok {
			check("cpu", "cpu.max", "50000 100000")
		}
		if fd, ok := g.FD(); !ok || fd < 0 {
			t.Errorf("FD() = %d, %v on v2", fd, ok)
		}
	case ModeV1:
		check("memory", "memory.limit_in_bytes", "67108864")
		dir, _ := g.dirFor("memory")
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			check("memory", "memory.memsw.limit_in_bytes", "67108864")
		}
		if v, err := readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill_disable"); err != nil || v != 0 {
			t.Errorf("memory.oom_control oom_kill_disable = %d, %v; want 0", v, err)
		}
		check("pids", "pids.max", "16")
		check("cpu", "cpu.cfs_quota_us", "50000")
		check("cpu", "cpu.cfs_period_us", "100000")
		if fd, ok := g.FD(); ok || fd != -1 {
			t.Errorf("FD() = %d, %v on v1; want -1, false", fd, ok)
		}
		if len(g.Paths()) != 5 {
			t.Errorf("Paths = %v, want one per hierarchy (memory, pids, cpu, cpuacct, freezer)", g.Paths())
		}
	}
	for _, p := range g.Paths() {
		if !strings.HasPrefix(filepath.Base(p), "sbx-test") {
			t.Errorf("path %s is not named sbx-<id>", p)
		}
	}
	// Same id again: refused, nothing of the first touched.
	if _, err := New(strings.TrimPrefix(filepath.Base(g.Paths()[0]), "sbx-"), Limits{}); !errors.Is(err, unix.EEXIST) {
		t.Errorf("New with a used id = %v, want EEXIST", err)
	}
}

// TestMemoryLimitOOM: 1 GiB touched under a 64 MiB limit is OOM-killed; the
// kernel counts the kill and the peak stays at the limit.
func TestMemoryLimitOOM(t *testing.T) {
	requireKind(t, KindMemory)
	const limit = 64 << 20
	g := newTestGroup(t, Limits{MemoryBytes: limit})
	mustEnforce(t, g, KindMemory)
	h := startHelper(t, g, "hog")
	h.start(t)
	ws := h.wait(t, 2*time.Minute)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("hog ended with %v (exit %d), want SIGKILL from the OOM killer", ws, ws.ExitStatus())
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats after the OOM kill: %+v", st)
	if st.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", st.OOMKills)
	}
	const margin = 1 << 20
	if st.PeakMemoryBytes <= limit/2 || st.PeakMemoryBytes > limit+margin {
		t.Errorf("PeakMemoryBytes = %d, want in (%d, %d]", st.PeakMemoryBytes, limit/2, limit+margin)
	}
}

const forkLoop = `
import os, sys, time
sys.stdin.buffer.read(1)
ok = fail = 0
while fail < 200 and ok < 1000:  # bounded even if the limit were missing
    try:
        pid = os.fork()
    except BlockingIOError:
        fail += 1
        continue
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    ok += 1
print(ok, fail, flush=True)
time.sleep(600)
`

// TestPidsLimitForkLoop: a fork loop under pids=16 never has more than 16
// tasks; the refused forks fail with EAGAIN (nothing is killed) and are
// counted in pids.events.
func TestPidsLimitForkLoop(t *testing.T) {
	requireKind(t, KindPids)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3, the fork loop's interpreter: %v", err)
	}
	const limit = 16
	g := newTestGroup(t, Limits{Pids: limit})
	mustEnforce(t, g, KindPids)
	dir, _ := g.dirFor("pids")
	tasksFile := "cgroup.threads"
	if g.Mode() == ModeV1 {
		tasksFile = "tasks"
	}
	h := startCmd(t, g, exec.Command(py, "-S", "-c", forkLoop))
	var maxCurrent, maxTasks int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // sample as fast as the files can be read
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v, err := readInt(filepath.Join(dir, "pids.current")); err == nil {
				maxCurrent = max(maxCurrent, v)
			}
			if b, err := os.ReadFile(filepath.Join(dir, tasksFile)); err == nil {
				maxTasks = max(maxTasks, int64(strings.Count(string(b), "\n")))
			}
		}
	}()
	h.start(t)
	line := h.line(t, 2*time.Minute)
	close(stop)
	<-sampled
	var ok, fail int
	if _, err := fmt.Sscan(line, &ok, &fail); err != nil {
		t.Fatalf("fork loop said %q: %v", line, err)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("forks ok %d, refused %d; sampled max pids.current %d, max tasks %d; stats %+v", ok, fail, maxCurrent, maxTasks, st)
	if ok < 1 || ok > limit-1 {
		t.Errorf("%d forks succeeded, want 1..%d (the parent is one of the %d)", ok, limit-1, limit)
	}
	if maxTasks > limit {
		t.Errorf("the group held up to %d tasks (%s), limit %d", maxTasks, tasksFile, limit)
	}
	// pids.current is a charge counter, not a task count: a fork charges
	// first and reverts when that went over the limit (pids_try_charge in
	// kernel/cgroup/pids.c), so a read may catch limit+1 for an instant.
	// The watermark, pids.peak, is only raised by charges that succeed.
	if maxCurrent > limit+1 {
		t.Errorf("pids.current reached %d, limit %d (+1 for a charge being reverted)", maxCurrent, limit)
	}
	if st.PidsMaxEvents < int64(fail) {
		t.Errorf("PidsMaxEvents = %d, want >= %d refused forks", st.PidsMaxEvents, fail)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids.peak")); err == nil {
		if st.PidsPeak < int64(ok+1) || st.PidsPeak > limit {
			t.Errorf("PidsPeak = %d, want %d..%d", st.PidsPeak, ok+1, limit)
		}
	} else {
		t.Logf("this kernel has no pids.peak: PidsPeak unknown (%d)", st.PidsPeak)
	}
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if ws := h.wait(t, 10*time.Second); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("fork loop ended with %v, want SIGKILL from Kill", ws)
	}
}

// TestCPULimit: two threads spinning under CPUs=0.5 get 0.5 s of CPU per
// second of wall time (unlimited they would get up to 2). The rate is
// measured over 1 s in the middle of a 1.5 s run: a window that starts
// with the run also gets the quota the period had left, up to one extra
// period's worth (+10%).
func TestCPULimit(t *testing.T) {
	requireKind(t, KindCPUs)
	g := newTestGroup(t, Limits{CPUs: 0.5})
	mustEnforce(t, g, KindCPUs)
	favour(t, g)
	h := startHelper(t, g, "busy", "THREADS=2", "WALL=1500ms")
	h.start(t)
	time.Sleep(250 * time.Millisecond)
	u1, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	time.Sleep(time.Second)
	u2, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t1)
	if l := h.line(t, time.Minute); !strings.HasPrefix(l, "before ") {
		t.Fatalf("busy helper said %q, want before NS first", l)
	}
	if l := h.line(t, time.Minute); l != "done" {
		t.Fatalf("busy helper said %q", l)
	}
	if ws := h.wait(t, 10*time.Second); ws.ExitStatus() != 0 {
		t.Fatalf("busy helper: %v", ws)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	rate := float64(u2-u1) / float64(wall)
	t.Logf("CPUs=0.5: %v of CPU in %v of wall time = %.3f CPUs; whole run (1.5 s): %v (user %v, system %v)", u2-u1, wall, rate, st.UserCPU+st.SystemCPU, st.UserCPU, st.SystemCPU)
	if rate < 0.375 || rate > 0.625 {
		t.Errorf("CPU rate = %.3f CPUs, want 0.5 ±25%%", rate)
	}
	dir, _ := g.dirFor("cpu")
	if n, err := readKey(filepath.Join(dir, "cpu.stat"), "nr_throttled"); err != nil || n < 5 {
		t.Errorf("cpu.stat nr_throttled = %d (%v): the quota was not what held the threads back", n, err)
	}
}

// favour gives a test's group the highest CPU weight. The dev machine is
// shared (other engineers' builds and fuzzers run on the same two cores),
// and a group competes at its parent's level as one entity of weight 1024
// against every busy task there: without this, a CPU test measures other
// people's load. The quota under test bounds usage whatever the weight.
func favour(t *testing.T, g *Group) {
	t.Helper()
	dir, _ := g.dirFor("cpu")
	file, v := "cpu.weight", "10000" // cgroup-v2.rst: [1, 10000]
	if g.Mode() == ModeV1 {
		file, v = "cpu.shares", "262144" // sched-design-CFS.rst: max shares
	}
	if err := writeFile(filepath.Join(dir, file), v); err != nil && !errors.Is(err, unix.ENOENT) {
		t.Fatal(err)
	}
}

func kernelRelease() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// TestCPUUsageTracksBusy: CPUUsage follows a busy process while it runs and
// agrees with Stats at the end.
func TestCPUUsageTracksBusy(t *testing.T) {
	g := newTestGroup(t, Limits{})
	favour(t, g)
	u0, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	if u0 != 0 {
		t.Errorf("CPUUsage of a new group = %v, want 0", u0)
	}
	h := startHelper(t, g, "busy", "THREADS=1", "WALL=400ms")
	h.start(t)
	var samples []time.Duration
	for done := false; !done; {
		select {
		case <-h.done:
			done = true
		case <-time.After(10 * time.Millisecond):
		}
		u, err := g.CPUUsage()
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, u)
	}
	rises := 0
	for i := 1; i < len(samples); i++ {
		if samples[i] < samples[i-1] {
			t.Fatalf("CPUUsage went back from %v to %v", samples[i-1], samples[i])
		}
		if samples[i] > samples[i-1] {
			rises++
		}
	}
	final := samples[len(samples)-1]
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	sum := st.UserCPU + st.SystemCPU
	t.Logf("%d samples, %d rises, final CPUUsage %v, Stats user+system %v", len(samples), rises, final, sum)
	// The only process that ran in the group is the helper: the kernel's
	// per-process accounting (wait4 rusage) must agree with the group's.
	// Between two bounds: the group has all the CPU the helper used
	// after its go byte (it was in the group by then), and at most all
	// it ever used. Equal to the first on v1, where the helper is
	// attached after its start, whose CPU (exec, the race runtime's
	// start) the group never sees: under load that was 57 ms of 488.
	// Equal to the second for a child born in the group (v2,
	// CLONE_INTO_CGROUP), charged for its own start-up too, which takes
	// ~0.4 s of CPU under the VM's TCG emulation: so no upper bound from
	// the wall time either.
	ru := h.cmd.ProcessState.UserTime() + h.cmd.ProcessState.SystemTime()
	var beforeNS int64
	if line := h.line(t, 5*time.Second); !strings.HasPrefix(line, "before ") {
		t.Fatalf("the helper's first line %q, want before NS", line)
	} else if beforeNS, err = strconv.ParseInt(strings.TrimPrefix(line, "before "), 10, 64); err != nil {
		t.Fatalf("the helper's first line %q: %v", line, err)
	}
	busy := ru - time.Duration(beforeNS)
	t.Logf("the helper's own rusage: %v, %v of it after its go byte", ru, busy)
	if final < 50*time.Millisecond {
		t.Errorf("CPUUsage after 400 ms of one busy thread = %v, want >= 50 ms", final)
	}
	if tol := 20*time.Millisecond + final/20; final < busy-tol || final > ru+tol {
		t.Errorf("CPUUsage %v is not between the helper's CPU after its go byte (%v) and all of its rusage (%v), ±%v", final, busy, ru, tol)
	}
	if rises < 5 {
		t.Errorf("CPUUsage rose only %d times over %d samples: it does not track the running process", rises, len(samples))
	}
	if d := (sum - final).Abs(); d > 20*time.Millisecond {
		t.Errorf("Stats user+system %v and CPUUsage %v differ by %v", sum, final, d)
	}
}

// TestKillTree: 13 processes in a tree, all ignoring SIGTERM, end at once.
func TestKillTree(t *testing.T) {
	g := newTestGroup(t, Limits{})
	h := startHelper(t, g, "tree", "DEPTH=2")
	h.start(t)
	var pids []int
	for range 13 {
		pid, err := strconv.Atoi(h.line(t, time.Minute))
		if err != nil {
			t.Fatalf("tree helper: %v", err)
		}
		pids = append(pids, pid)
	}
	for _, p := range pids {
		unix.Kill(p, unix.SIGTERM)
	}
	time.Sleep(200 * time.Millisecond)
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d died of SIGTERM: the test proves nothing", p)
		}
	}
	start := time.Now()
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	took := time.Since(start)
	if left, err := g.procs(); err != nil || len(left) > 0 {
		t.Errorf("after Kill the group still holds %v (%v)", left, err)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d alive after Kill", p)
		}
	}
	if ws := h.wait(t, 10*time.Second); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("tree root ended with %v, want SIGKILL", ws)
	}
	t.Logf("Kill of 13 processes (freeze/kill/thaw or cgroup.kill, then wait until empty) took %v", took)
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestAttachAndFD: Attach moves a running process in (every hierarchy on
// v1); on v2 a child started with FD is born inside.
func TestAttachAndFD(t *testing.T) {
	g := newTestGroup(t, Limits{})
	h := startHelper(t, nil, "sleep")
	pid := h.cmd.Process.Pid
	if err := g.Attach(pid); err != nil {
		t.Fatalf("Attach(%d): %v", pid, err)
	}
	for _, d := range g.Paths() {
		if pids, err := readPids(filepath.Join(d, "cgroup.procs")); err != nil || !slices.Contains(pids, pid) {
			t.Errorf("%s/cgroup.procs = %v (%v), want %d in it", d, pids, err, pid)
		}
	}
	if err := g.Attach(0); err == nil {
		t.Error("Attach(0) = nil")
	}
	h.kill()
	if err := g.Attach(pid); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Attach of a dead pid = %v, want ESRCH", err)
	}
	if g.Mode() != ModeV2 {
		return
	}
	h2 := startHelper(t, g, "sleep") // UseCgroupFD: CLONE_INTO_CGROUP
	if pids, err := readPids(filepath.Join(g.Paths()[0], "cgroup.procs")); err != nil || !slices.Contains(pids, h2.cmd.Process.Pid) {
		t.Errorf("child started with FD: cgroup.procs = %v (%v), want %d", pids, err, h2.cmd.Process.Pid)
	}
}

// TestDestroy: Destroy refuses (EBUSY, naming the directory) while a process
// lives inside, succeeds after Kill, leaves nothing, and is idempotent.
func TestDestroy(t *testing.T) {
	old := rmdirWait
	rmdirWait = 100 * time.Millisecond
	t.Cleanup(func() { rmdirWait = old })
	g := newTestGroup(t, Limits{MemoryBytes: 64 << 20, Pids: 16})
	paths := g.Paths()
	startHelper(t, g, "sleep")
	err := g.Destroy()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), paths[0]) {
		t.Fatalf("Destroy with a live process = %v, want EBUSY naming %s", err, paths[0])
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v after a refused Destroy", p, err)
		}
	}
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatalf("Destroy after Kill: %v", err)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Destroy: %v", p, err)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if _, err := g.CPUUsage(); err == nil {
		t.Error("CPUUsage after Destroy = nil error")
	}
}

// TestCleanupStale: an empty sbx-* cgroup nobody owns is removed in every
// hierarchy; one with a process, one a live Group owns (empty, between New
// and its first process), and one not named sbx-* are left alone.
func TestCleanupStale(t *testing.T) {
	live := newTestGroup(t, Limits{})
	lay, err := currentLayout()
	if err != nil {
		t.Fatal(err)
	}
	var bases []string
	if lay.mode == ModeV2 {
		bases = []string{lay.v2.base}
	} else {
		for _, h := range lay.v1 {
			bases = append(bases, h.base)
		}
	}
	pid := os.Getpid()
	mk := func(p string) string {
		t.Helper()
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Rmdir(p) })
		return p
	}
	var stale, other []string
	for _, b := range bases {
		stale = append(stale, mk(filepath.Join(b, fmt.Sprintf("sbx-stale%d", pid))))
		other = append(other, mk(filepath.Join(b, fmt.Sprintf("notsbx-stale%d", pid))))
	}
	busy := mk(filepath.Join(bases[0], fmt.Sprintf("sbx-busy%d", pid)))
	h := startHelper(t, nil, "sleep")
	if err := writeFile(filepath.Join(busy, "cgroup.procs"), strconv.Itoa(h.cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.kill() }) // registered after the rmdir: runs before it

	start := time.Now()
	if err := CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	took := time.Since(start)
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s not removed (%v)", p, err)
		}
	}
	for _, p := range append(append(other, busy), live.Paths()...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	h2 := startHelper(t, live, "sleep")
	if pids, err := readPids(filepath.Join(live.Paths()[0], "cgroup.procs")); err != nil || !slices.Contains(pids, h2.cmd.Process.Pid) {
		t.Errorf("the live group no longer takes processes: %v, %v", pids, err)
	}
	start = time.Now()
	if err := CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	t.Logf("CleanupStale: %v with 1 stale cgroup per hierarchy, %v with none", took, time.Since(start))
}

// TestCleanupStaleSkipsLiveNames: a name whose directory is locked in the
// first hierarchy belongs to a live Group (of another sbx, or being made
// by makeLockedDir), so CleanupStale does not try it in the other
// hierarchies, even where that directory is not locked (yet). Once the
// lock is gone, the next CleanupStale removes the name everywhere.
func TestCleanupStaleSkipsLiveNames(t *testing.T) {
	lay, err := currentLayout()
	if err != nil {
		t.Fatal(err)
	}
	if lay.mode != ModeV1 || len(lay.v1) < 2 {
		t.Skip("needs cgroup v1 with two hierarchies or more: one hierarchy has no others to skip")
	}
	var dirs []string
	for _, h := range lay.v1 {
		p := filepath.Join(h.base, fmt.Sprintf("sbx-foreign%d", os.Getpid()))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Rmdir(p) })
		dirs = append(dirs, p)
	}
	// A lock of its own open file description: to flock, as good as
	// another process's (flock(2)).
	fd, err := unix.Open(dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	for _, p := range dirs {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed while its name is locked in %s: %v", p, dirs[0], err)
		}
	}
	unix.Close(fd)
	if err := CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	for _, p := range dirs {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed once its lock was gone (%v)", p, err)
		}
	}
}

// TestSupervisorLeaf (v2): three sbx processes started in the same cgroup,
// which they hold, call New nearly together. Each must move itself into
// its own leaf sbx-supervisor-<pid>, the controllers must get enabled, and
// each must get a limited cgroup. A process that is not sbx in that cgroup
// makes enabling impossible at once; another sbx that stays does after
// enableWait. New then moves sbx back, creates a group without those
// limits and says why in Unenforced.
func TestSupervisorLeaf(t *testing.T) {
	if want(t).mode != ModeV2 {
		t.Skipf("v1 has no no-internal-process rule: sbx never moves itself (mode %s)", want(t).mode)
	}
	requireKind(t, KindMemory, KindPids)
	first := newTestGroup(t, Limits{}) // enables the controllers in our own base
	lay, _ := currentLayout()
	own, _ := os.ReadFile("/proc/self/cgroup")
	t.Logf("this test process: %s, base %s, first group %v", strings.TrimSpace(string(own)), lay.v2.base, first.Paths())
	if lay.v2.base != lay.v2.mount && !strings.HasSuffix(strings.TrimSpace(string(own)), fmt.Sprintf("/%s%d", supervisorPrefix, os.Getpid())) {
		t.Errorf("New did not move this process into its leaf: %s", own)
	}

	parent := func(name string) (string, int) {
		p := filepath.Join(lay.v2.base, fmt.Sprintf("%s%d", name, os.Getpid()))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := unix.Rmdir(p); err != nil {
				t.Errorf("rmdir %s: %v", p, err)
			}
		})
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		ctls, _ := os.ReadFile(filepath.Join(p, "cgroup.controllers"))
		for _, c := range []string{"memory", "pids"} {
			if !slices.Contains(strings.Fields(string(ctls)), c) {
				t.Fatalf("%s/cgroup.controllers = %q lacks %s", p, ctls, c)
			}
		}
		return p, fd
	}
	report := func(h *helper) newgroupReport {
		var r newgroupReport
		l := h.line(t, 2*time.Minute)
		if err := jsonUnmarshal(l, &r); err != nil {
			t.Fatalf("helper %d said %q: %v", h.cmd.Process.Pid, l, err)
		}
		return r
	}

	// Staggered by 150 ms: a sibling that reaches its move late (a loaded
	// host, the VM's emulation) must be waited for, not given up on.
	t.Run("three, staggered", func(t *testing.T) {
		dir, fd := parent("sbxtest-leaf")
		var hs []*helper
		for range 3 {
			hs = append(hs, startHelperInFD(t, fd, "newgroup"))
		}
		for i, h := range hs {
			if i > 0 {
				time.Sleep(150 * time.Millisecond)
			}
			h.start(t)
		}
		for _, h := range hs {
			r := report(h)
			t.Logf("helper: %+v", r)
			if r.Err != "" {
				t.Errorf("helper %d: New: %s", r.Pid, r.Err)
				continue
			}
			if r.Enforced[KindMemory] != ModeV2 || r.Enforced[KindPids] != ModeV2 {
				t.Errorf("helper %d: Enforced %v, Unenforced %v; want memory and pids by cgroup2", r.Pid, r.Enforced, r.Unenforced)
			}
			if wantOwn := fmt.Sprintf("/%s/%s%d", filepath.Base(dir), supervisorPrefix, r.Pid); !strings.HasSuffix(r.OwnCgroup, wantOwn) {
				t.Errorf("helper %d is in %q, want its leaf ...%s", r.Pid, r.OwnCgroup, wantOwn)
			}
			if wantPath := filepath.Join(dir, fmt.Sprintf("sbx-leaf-%d", r.Pid)); len(r.Paths) != 1 || r.Paths[0] != wantPath {
				t.Errorf("helper %d: Paths %v, want [%s]", r.Pid, r.Paths, wantPath)
			}
		}
		if sc, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); !strings.Contains(string(sc), "memory") || !strings.Contains(string(sc), "pids") {
			t.Errorf("%s/cgroup.subtree_control = %q", dir, sc)
		}
		for _, h := range hs {
			h.stdin.Close()
			if ws := h.wait(t, time.Minute); ws.ExitStatus() != 0 {
				t.Errorf("helper %d: %v", h.cmd.Process.Pid, ws)
			}
		}
		// The helpers have exited: their leaves are empty and stale.
		if _, err := cleanupDir(dir, "", map[string]bool{}); err != nil {
			t.Fatal(err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "sbx-*")); len(left) > 0 {
			t.Errorf("left after the helpers exited and cleanup: %v", left)
		}
	})

	// failed checks what a New that could not enable the controllers left.
	failed := func(t *testing.T, dir string, r newgroupReport, want ...string) {
		t.Helper()
		if r.Err != "" {
			t.Fatalf("New: %s", r.Err)
		}
		if len(r.Enforced) != 0 {
			t.Errorf("Enforced = %v, want nothing: the controllers cannot be enabled", r.Enforced)
		}
		why := r.Unenforced[KindMemory]
		for _, w := range append(want, "device or resource busy") {
			if !strings.Contains(why, w) {
				t.Errorf("Unenforced[memory] = %q, want it to mention %q", why, w)
			}
		}
		if wantOwn := "/" + filepath.Base(dir); !strings.HasSuffix(r.OwnCgroup, wantOwn) {
			t.Errorf("helper is in %q after the failed attempt, want back in ...%s", r.OwnCgroup, wantOwn)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, supervisorPrefix+"*")); len(left) > 0 {
			t.Errorf("the failed attempt left %v", left)
		}
	}

	// A child of sbx in the base (the sbx-init memfd's copy process, which
	// a C constructor forks before sbx's move into its leaf) leaves on its
	// own: New waits for it, though its exe is not sbx's.
	t.Run("child of sbx that leaves", func(t *testing.T) {
		dir, fd := parent("sbxtest-child")
		h := startHelperInFD(t, fd, "newgroup", "CHILD_SLEEP=0.4")
		h.start(t)
		r := report(h)
		t.Logf("helper: %+v", r)
		if r.Err != "" || r.Enforced[KindMemory] != ModeV2 || r.Enforced[KindPids] != ModeV2 {
			t.Errorf("New beside its own child: err %q, Enforced %v, Unenforced %v; want memory and pids by cgroup2", r.Err, r.Enforced, r.Unenforced)
		}
		if sc, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); !strings.Contains(string(sc), "memory") {
			t.Errorf("%s/cgroup.subtree_control = %q", dir, sc)
		}
		h.stdin.Close()
		if ws := h.wait(t, time.Minute); ws.ExitStatus() != 0 {
			t.Errorf("helper: %v", ws)
		}
		if _, err := cleanupDir(dir, "", map[string]bool{}); err != nil {
			t.Fatal(err)
		}
	})

	// A process that is not sbx never leaves: New must not wait for it.
	// The helper would wait 20 s: New giving up within 10 s, however
	// loaded the machine, is New not waiting (with the default 2 s, a
	// half of it was the bound, tight for a loaded CI machine).
	t.Run("foreign process", func(t *testing.T) {
		dir, fd := parent("sbxtest-foreign")
		cmd := exec.Command("/bin/sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		foreign := startCmd(t, nil, cmd)
		const wait = 20 * time.Second
		h := startHelperInFD(t, fd, "newgroup", "ENABLE_WAIT="+wait.String())
		h.start(t)
		r := report(h)
		t.Logf("helper: %+v", r)
		failed(t, dir, r, strconv.Itoa(foreign.cmd.Process.Pid), "not sbx")
		if r.Took > wait/2 {
			t.Errorf("New took %v: it waited for a process that is not sbx", r.Took)
		}
		h.stdin.Close()
		if ws := h.wait(t, time.Minute); ws.ExitStatus() != 0 {
			t.Errorf("helper: %v", ws)
		}
	})

	// Another sbx process that stays in the base (not calling New) is
	// waited for, but only for enableWait.
	t.Run("sbx sibling that stays", func(t *testing.T) {
		dir, fd := parent("sbxtest-sibling")
		sibling := startHelperInFD(t, fd, "sleep")
		h := startHelperInFD(t, fd, "newgroup", "ENABLE_WAIT=300ms")
		h.start(t)
		r := report(h)
		t.Logf("helper: %+v", r)
		failed(t, dir, r, strconv.Itoa(sibling.cmd.Process.Pid), "did not move out")
		if r.Took < 300*time.Millisecond {
			t.Errorf("New took %v: it did not wait for the sibling sbx", r.Took)
		}
		h.stdin.Close()
		if ws := h.wait(t, time.Minute); ws.ExitStatus() != 0 {
			t.Errorf("helper: %v", ws)
		}
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestLeaving reads /proc/PID/stat as retryEnable does: a child of this
// process is leaving (it is sbx's own), its parent and pid 1 are not, and
// a comm with ") " in it does not shift the fields.
func TestLeaving(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "a) 1 2 3 4 5")
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/bin/sleep", odd} {
		c := exec.Command(path, "5")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if !leaving(c.Process.Pid) {
			t.Errorf("leaving(%d), a child started as %q: false, want true", c.Process.Pid, filepath.Base(path))
		}
		c.Process.Kill()
		c.Wait()
	}
	for _, p := range []int{os.Getppid(), 1} {
		if leaving(p) {
			t.Errorf("leaving(%d): true, want false (not our child, not exiting)", p)
		}
	}
	if leaving(1 << 30) {
		t.Error("leaving of a pid that does not exist: true")
	}
}
