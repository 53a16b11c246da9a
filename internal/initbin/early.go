package initbin

import (
	"os"
	"runtime"

	_ "github.com/sbx-sandbox/sbx/internal/leanexec" // its init first: the P count read below
)

// early is set when the copy was started from the package init.
var early bool

// An unprivileged `sbx exec` makes exactly one sandbox and needs the
// memfd for it within a few milliseconds: its copy (~2 ms of a CPU for
// 2.9 MB on the dev machine) is started here, before main, so that it
// runs beside the package inits and the CLI's flag parsing and profile
// merge, instead of from newSupervisor, after them, where the clone
// waited for it (issue 13). Package inits run before main (the spec's
// "Package initialization"); internal/leanexec's, which has put this
// process on one P by now, runs before this one, which imports it.
//
// Only on one P, because that is where it paid. Interleaved A/B of
// `sbx exec --profile strict -- /bin/true` under SCHED_FIFO (so that the
// other load on the shared 2-CPU machine does not decide), 100 pairs:
// as uid 65534 (one P) the wall time fell 5.0 ms with the same CPU; as
// root (two Ps) it gained no wall time and cost 3.2 ms more CPU (three
// runs: +1.8, +2.7, +3.1), so root keeps the copy in newSupervisor.
// Every other command makes the memfd when a sandbox first needs it
// (Prepare, Get): `sbx serve` once for all its sandboxes, `sbx doctor`
// for its probe, `sbx --version` never.
func init() {
	if Embedded() && startsEarly(os.Args) && runtime.GOMAXPROCS(0) == 1 {
		early = true
		Prepare()
		// On one P the new goroutine would wait until the main one
		// blocks, which the CPU-bound inits and flag parsing hardly do:
		// yield once, so that it starts its copy, a syscall that lets
		// the P go back to main (sysmon hands a P held in a syscall to
		// another M).
		runtime.Gosched()
	}
}

// startsEarly says whether argv is `sbx exec ...`: the first argument is
// the command, as the CLI has no global flag that takes a value
// (internal/leanexec reads it the same way). The init, re-executed with
// its own argv, never matches, and sbx-init embeds no image.
func startsEarly(argv []string) bool {
	return len(argv) > 1 && argv[1] == "exec"
}
