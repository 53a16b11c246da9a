//go:build integration

package tests

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/kernel"
)

// TestHugeHeapOfOneShotRun (issue 13): an `sbx exec` collapses the start
// of its Go heap into a transparent huge page, and tells its init to do
// the same (internal/leanexec, HugeHeap); SBX_HUGE_HEAP=0 turns both off.
// Read from the host while the payload sleeps: AnonHugePages of the
// supervisor and of its init (/proc/PID/smaps_rollup), and the init's
// environment, which is all the supervisor gives it.
func TestHugeHeapOfOneShotRun(t *testing.T) {
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(thp, []byte("[never]")) {
		t.Skipf("no transparent huge pages here (/sys/kernel/mm/transparent_hugepage/enabled: %q, %v)", thp, err)
	}
	if !kernel.AtLeast(6, 1) {
		t.Skip("MADV_COLLAPSE needs Linux 6.1")
	}
	forEach(t, func(t *testing.T, r runner) {
		for _, tc := range []struct {
			name, env       string
			args            []string
			supHuge, inHuge bool
		}{
			{"default", "", nil, true, true},
			{"SBX_HUGE_HEAP=0", "0", nil, false, false},
			// The init's memory counts toward the limit: under 64 MiB
			// the payload keeps it (nsjail.hugeHeapMinMemory).
			{"under a small memory limit", "", []string{"--memory", "32M"}, true, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var env []string
				if tc.env != "" {
					env = []string{"SBX_HUGE_HEAP=" + tc.env}
				}
				sup, initPid, stop := startSleeping(t, r, env, tc.args...)
				defer stop()
				procs := map[string]int{"the supervisor": sup, "the init": initPid}
				if os.Geteuid() != 0 {
					// The init is not dumpable (PR_SET_DUMPABLE 0):
					// only root reads its environ and smaps.
					t.Logf("as uid %d: the init's environment and pages are root's to read; the supervisor's only", os.Geteuid())
					delete(procs, "the init")
				} else if err := wantInitEnv(initPid, tc.inHuge); err != nil {
					t.Error(err)
				}
				// Only where a huge page is due: not AnonHugePages == 0
				// elsewhere, as khugepaged may still collapse the few
				// ranges Go's runtime advises itself (its page
				// allocator's summaries).
				if !tc.supHuge {
					delete(procs, "the supervisor")
				}
				if !tc.inHuge {
					delete(procs, "the init")
				}
				for who, pid := range procs {
					if kb := anonHugeKB(t, pid); kb < 2048 {
						// Best effort by design: with no huge page to be
						// had (memory too fragmented to compact), sbx runs
						// in small pages. The test's own collapse tells.
						if err := collapseOne(); err != nil {
							t.Skipf("%s (pid %d) has no huge page, and this test could not collapse one of its own either (madvise MADV_COLLAPSE: %v): the kernel has none to give now", who, pid, err)
						}
						t.Errorf("%s (pid %d): AnonHugePages %d kB, want a 2048 kB huge page at least", who, pid, kb)
					}
				}
			})
		}
	})
}

// startSleeping starts `sbx exec --profile strict [args] -- /bin/sleep 20`
// with env added to the test's environment, and returns once the payload
// sleeps: sbx's pid, its init's, and stop, which ends the run by sbx's
// own SIGINT handling (forwarded, then the run reports: nothing is left).
func startSleeping(t *testing.T, r runner, env []string, args ...string) (sup, initPid int, stop func()) {
	t.Helper()
	cmd := r.command(append(append([]string{"exec", "--profile", "strict"}, args...), "--", "/bin/sleep", "20")...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	sup = cmd.Process.Pid
	// waitForPayload ends the test with t.Fatal when the payload never
	// sleeps: the run is ended here then, as the caller's deferred stop
	// is not yet registered. Not t.Failed, which an earlier error of the
	// same test would set.
	waited := false
	defer func() {
		if !waited {
			stop()
		}
	}()
	initPid = waitForPayload(t, sup, "sleep")
	waited = true
	return sup, initPid, stop
}

// wantInitEnv checks that the init's environment has SBX_HUGE_HEAP=1 or
// not, as want says.
func wantInitEnv(pid int, want bool) error {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return fmt.Errorf("the init's environment: %v", err)
	}
	got := false
	for _, kv := range bytes.Split(env, []byte{0}) {
		got = got || string(kv) == "SBX_HUGE_HEAP=1"
	}
	if got != want {
		return fmt.Errorf("the init's environment %q: SBX_HUGE_HEAP=1 %v, want %v", env, got, want)
	}
	return nil
}

// waitForPayload waits for sbx (pid sup) to have an init whose child is
// the payload named comm, and returns the init's pid.
func waitForPayload(t *testing.T, sup int, comm string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, init := range initsOf(sup) {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", init, init))
			for _, k := range strings.Fields(string(kids)) {
				if c, _ := os.ReadFile("/proc/" + k + "/comm"); strings.TrimSpace(string(c)) == comm {
					return init
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("sbx (pid %d) started no %s payload within 20 s", sup, comm)
	return 0
}

// collapseOne asks the kernel for one huge page as sbx does: 2 MiB of a
// fresh mapping, one page of it touched, collapsed.
func collapseOne() error {
	const huge = 2 << 20
	m, err := unix.Mmap(-1, 0, 2*huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	off := int(huge - uintptr(unsafe.Pointer(&m[0]))%huge)
	if off == huge {
		off = 0
	}
	m[off] = 1
	return unix.Madvise(m[off:off+huge], unix.MADV_COLLAPSE)
}

// anonHugeKB is pid's AnonHugePages, from /proc/PID/smaps_rollup.
func anonHugeKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatalf("smaps_rollup of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "AnonHugePages:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("smaps_rollup of pid %d: %q", pid, line)
			}
			return n
		}
	}
	t.Fatalf("smaps_rollup of pid %d has no AnonHugePages line:\n%s", pid, b)
	return 0
}

// goFixedHeapBase is where Go's heap begins when its base is not
// randomized: the first arena hint of mallocinit on linux/amd64 and
// arm64 (runtime/malloc.go).
const goFixedHeapBase = 0x00c000000000

// TestInitHeapAtFixedBase (issue 13): sbx-init is built with Go's heap
// at its fixed base (Makefile, INITEXP: GOEXPERIMENT
// norandomizedheapbase64), so that the huge page the init of a one-shot
// run collapses at its start (TestHugeHeapOfOneShotRun) holds the start
// of its heap and what follows, not a random part of it; and the lean
// sbx, which links C, keeps Go 1.26's random base. Read from the host
// while the payload sleeps: /proc/PID/maps of both.
func TestInitHeapAtFixedBase(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("Go's fixed heap base %#x is amd64's and arm64's; this is %s", goFixedHeapBase, runtime.GOARCH)
	}
	initBin := filepath.Join(repoDir, "internal", "initbin", "sbx-init.bin")
	bi, err := buildinfo.ReadFile(initBin)
	if err != nil {
		t.Fatalf("build info of %s: %v", initBin, err)
	}
	if e := os.Getenv("GOEXPERIMENT"); e != "" {
		// make builds every binary with the user's GOEXPERIMENT as is.
		t.Skipf("GOEXPERIMENT=%s is set: the Makefile builds sbx-init with it, not with its own", e)
	}
	if !strings.HasPrefix(bi.GoVersion, "go1.26") {
		t.Skipf("%s is built with %s: Go 1.26 is the release known to take GOEXPERIMENT=norandomizedheapbase64 (golang/go#80392 proposes its removal)", initBin, bi.GoVersion)
	}
	forEach(t, func(t *testing.T, r runner) {
		sup, initPid, stop := startSleeping(t, r, nil)
		defer stop()
		if mapsFrom(t, sup, goFixedHeapBase) {
			t.Errorf("the supervisor (pid %d) has a mapping at Go's fixed heap base %#x: the lean sbx, which links C, must keep Go's random heap base", sup, goFixedHeapBase)
		}
		if os.Geteuid() != 0 {
			// The init is not dumpable (PR_SET_DUMPABLE 0).
			t.Logf("as uid %d: the init's maps are root's to read; the supervisor's only", os.Geteuid())
			return
		}
		if !mapsFrom(t, initPid, goFixedHeapBase) {
			t.Errorf("the init (pid %d, %s from %s) has no mapping at Go's fixed heap base %#x: its heap base is random, and its huge page holds only part of its heap", initPid, bi.GoVersion, initBin, goFixedHeapBase)
		}
	})
}

// mapsFrom says whether pid has a mapping that begins at addr.
func mapsFrom(t *testing.T, pid int, addr uint64) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatalf("maps of pid %d: %v", pid, err)
	}
	prefix := strconv.FormatUint(addr, 16) + "-"
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}
