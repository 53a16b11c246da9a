package nsjail

import (
	"slices"

	"github.com/sbx-sandbox/sbx/internal/initbin"
	"github.com/sbx-sandbox/sbx/internal/leanexec"
)

// initEnv is the init's own environment (the payload's is the Spec's,
// set at its execve). The Go runtime reads it before it starts anything
// (runtime.schedinit), which no call from Init could do.
//
// GOMAXPROCS=1, whatever the host's CPU count or the affinity sbx runs
// with. The init's goroutines besides the main one (lo up, the denial
// server, the control reader) spend their lives blocked in syscalls,
// which need no P, and the status line's warm-up runs while the main one
// is in its mount syscalls; more Ps would only let idle Ps spin up
// threads to look for work, on cores that are the payload's.
// The one step that needs two Ps, a fork (the vfork and the seccomp
// hold: TestInitOnOneCPU), raises the count for its length
// (forkExecOnTwoPs). Until issue 13's twelfth pass the init started with
// two and dropped to one after the payload's execve (waitOnOneP), and
// that GOMAXPROCS(1) handed back every span the second P had cached:
// ~75 page faults per run, in fresh span-set blocks (docs/DESIGN.md,
// "The init on one P from its start").
var initEnv = []string{"GOMAXPROCS=1"}

// hugeHeapMinMemory is the least memory limit under which the init still
// takes its huge page (Job.HugeHeapInit). The init's memory is the
// sandbox's, charged to its cgroup, and the huge page is ~1.2 MB more of
// it: under a limit of a few MB that would be the payload's headroom
// (measured: python3 with a 1 MB bytearray ran under --memory 8M, and
// with the huge page it ended at the limit). From 64 MiB up it is at
// most 2% of the limit.
const hugeHeapMinMemory = 64 << 20

// initEnviron is the init's environment for this run: initEnv, and
// SBX_HUGE_HEAP=1 when the run asks for a huge heap (Job.HugeHeapInit)
// and its memory limit, if any, leaves room for it (hugeHeapMinMemory).
// The init reads it from its package init (internal/leanexec), before it
// reads anything from the supervisor.
func (s *supervisor) initEnviron() []string {
	if m := s.job.Limits.MemoryBytes; s.job.HugeHeapInit && (m == 0 || m >= hugeHeapMinMemory) {
		return append(slices.Clip(initEnv), leanexec.HugeHeapEnv+"=1")
	}
	return initEnv
}

// chooseInit picks the init binary: sbx-init from its sealed memfd when
// this build embeds it (internal/initbin: made once per process, started
// by newSupervisor so that the copy overlaps the set-up), else sbx
// itself. The timeline says which, and the Result's namespaces layer too.
func (s *supervisor) chooseInit() {
	s.initExe = initbin.Get()
	if e := s.initExe; e.Kind == initbin.KindMemfd && s.job.T0 != 0 {
		// An `sbx exec` made the memfd for this run: when the copy was
		// done ("init is" below is when the clone had it). A copy done
		// before main is marked at main's start, the timeline's zero.
		name := "sbx: sbx-init memfd sealed (" + string(e.Copy)
		if e.Started != "" {
			name += ", " + string(e.Started)
		}
		if e.CopyWhy != "" {
			name += "; the sendfile failed: " + e.CopyWhy
		}
		if e.EarlyWhy != "" {
			name += "; the constructors' copy process failed: " + e.EarlyWhy
		}
		s.tl.add([]Mark{{name + ")", max(e.SealedNS, s.job.T0)}})
	}
	s.tl.mark("sbx: init is " + string(s.initExe.Kind))
}
