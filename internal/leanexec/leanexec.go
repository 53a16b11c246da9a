// Package leanexec puts the supervisor of an unprivileged `sbx exec` on
// one P, before the other packages' inits run (issue 13). main imports it
// for that side effect only.
//
// Why one P: the supervisor is waiting nearly all the time (on the init's
// pipes, its wait4), and its work comes in short bursts that one CPU does
// as fast. With a second P, each goroutine woken while another runs
// starts a spinning M that looks for work, finds none and parks again
// (futexes, context switches, one more thread), and sysmon keeps polling
// while one P idles beside one held in a syscall. Measured as uid 65534,
// 40 interleaved pairs: the supervisor's own CPU 21.1 → 18.6 ms
// (getrusage), 7 → 6 threads, 320 KB less private memory, wall unchanged
// (42.1 → 41.2 ms).
//
// Why not as root: there the supervisor attaches the init to its cgroup
// v1 hierarchies with a write that waits out an RCU grace period
// (cgroup/doc.go), and makes the groups with mkdirs that take a memcg
// lock; with one P every other goroutine waits meanwhile until sysmon
// takes the P back (20 µs to 10 ms), and the wall time rose 66.6 → 74.0 ms
// (60 pairs). An unprivileged sbx has no cgroup or is born into one
// (CLONE_INTO_CGROUP): nothing of the kind blocks.
//
// Why from a package init: GOMAXPROCS(1) later destroys the second P,
// which returns every span its mcache holds to the central lists
// (runtime.(*p).destroy → freemcache), whose span sets each map a fresh
// block: ~120 more minor faults and ~400 KB more private memory, once the
// second P had run the package inits and the CLI. Go initializes packages
// in import path order as soon as their imports are (the spec's "Package
// initialization", Go 1.21+), so this one, which imports only os and
// runtime, runs right after os, before the third-party inits.
//
// It also sets the GC percent of every `sbx exec` (ExecGCPercent), and
// backs the heap of a one-shot run with a transparent huge page
// (HugeHeap).
package leanexec

import (
	"os"
	"runtime"
	"runtime/debug"
)

func init() {
	if OneP(os.Args, os.Geteuid()) {
		runtime.GOMAXPROCS(1)
	}
	if GCPercent(os.Args, os.Getenv("GOGC")) {
		debug.SetGCPercent(ExecGCPercent)
	}
	if HugeHeap(os.Args, os.Getenv(HugeHeapEnv)) {
		adviseHugeHeap()
	}
}

// HugeHeapEnv turns the huge heap of a one-shot run (HugeHeap) off with
// "0" for an `sbx exec`, and on with "1", which is how the supervisor of
// one tells its init (nsjail.Job.HugeHeapInit).
const HugeHeapEnv = "SBX_HUGE_HEAP"

// HugeHeap says whether this process collapses the start of its Go heap
// into a transparent huge page (adviseHugeHeap): an `sbx exec`, unless
// SBX_HUGE_HEAP=0, and any process given SBX_HUGE_HEAP=1 (the init of
// such a run).
//
// Why: a process that lives for one run pays once for every 4 KiB of heap
// it touches, and on some hosts a page is dear. On the dev machine, a
// guest whose page tables the hypervisor shadows, a page's first touch
// costs 10-20 µs, and the supervisor's ~280 heap faults and the init's
// ~250 were most of their ~1,100 per run; a C probe touched 4 MiB page by
// page in 20 ms, and in 0.25 ms as two huge pages. The price is memory:
// the 2 MiB are resident whole, ~1.4 MB more for the supervisor and ~1.2
// MB more for the init, for the run's few milliseconds. So not `sbx
// serve`, whose warm pool keeps its inits waiting (their memory is paid
// per waiting sandbox), nor `sbx repl`, which lives on.
func HugeHeap(argv []string, env string) bool {
	switch env {
	case "1":
		return true
	case "0":
		return false
	}
	return len(argv) > 1 && argv[1] == "exec"
}

// ExecGCPercent is the GC percent of an `sbx exec` supervisor: the heap may
// grow to three times what is live between collections, against Go's
// default two. Why: a run that keeps the payload's output (the capture's
// head and tail, up to limits.output per stream, then the Result's
// strings and their JSON) holds a few MB for a moment, and with GOGC=100
// the GC ran five cycles for 1.4 MB of output (GODEBUG=gctrace=1). At 200,
// 20 interleaved runs each on the dev VM (getrusage, VmHWM): the
// supervisor's CPU 47.4 -> 39.6 ms with --json, 29.2 -> 27.8 ms
// streaming; its peak RSS +1.1 MB and -0.3 MB. A run without output never
// reached the first goal anyway (4 MB; now 8). Not GC off
// (debug.SetGCPercent(-1)) with a memory limit as backstop: 37.4 ms and
// +2.2 MB here, but a limit below what is live (an --output-limit of
// hundreds of MB) makes the GC run back to back, and one above it bounds
// nothing; 200 keeps the heap within 3× its live part whatever the
// payload does. Not 400: 37.6 ms, +3.1 MB.
const ExecGCPercent = 200

// GCPercent says whether the process is `sbx exec ...` (the sandbox's
// init and `sbx serve` keep Go's default) and the user set no GOGC of
// their own, which wins.
func GCPercent(argv []string, gogc string) bool {
	return gogc == "" && len(argv) > 1 && argv[1] == "exec"
}

// OneP says whether the process is `sbx exec ...` run by an unprivileged
// user: the first argument is the command, as the CLI has no global flag
// that takes a value. The sandbox's init, re-executed with its own argv
// (nsjail.IsInit), never matches: it keeps the two Ps it needs
// (nsjail/lean_linux.go). `sbx serve` keeps every CPU.
func OneP(argv []string, euid int) bool {
	return euid != 0 && len(argv) > 1 && argv[1] == "exec"
}
