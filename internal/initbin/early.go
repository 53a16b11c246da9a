package initbin

import (
	"os"
	"runtime"

	_ "github.com/sbx-sandbox/sbx/internal/leanexec" // its init first: the P count read below
)

// startedAt says where an `sbx exec` started the copy (Exe.Started);
// earlyWhy why the constructor's copy process did not (Exe.EarlyWhy).
var (
	startedAt Start
	earlyWhy  string
)

// An unprivileged `sbx exec` makes exactly one sandbox and needs the
// memfd for it within a few milliseconds: its copy (~2 ms of a CPU for
// 2.9 MB on the dev machine) is started here, before main, so that it
// runs beside the package inits and the CLI's flag parsing and profile
// merge, instead of from newSupervisor, after them, where the clone
// waited for it (issue 13). Package inits run before main (the spec's
// "Package initialization"); internal/leanexec's, which has put this
// process on one P by now, runs before this one, which imports it.
//
// From the package init only on one P. With two Ps (root) it saved no
// wall time there and cost CPU: interleaved A/B of `sbx exec --profile
// strict -- /bin/true` under SCHED_FIFO (so that the other load on the
// shared 2-CPU machine does not decide), 100 pairs: as uid 65534 (one P)
// the wall time fell 5.0 ms with the same CPU; as root it cost 3.2 ms
// more CPU (three runs: +1.8, +2.7, +3.1) for nothing. Started from main
// instead, once the inits are done (PrepareForExec), root's wall time
// fell 1.95 ms with the same CPU (+0.15). Every other command makes the
// memfd when a sandbox first needs it (Prepare, Get): `sbx serve` once
// for all its sandboxes, `sbx doctor` for its probe, `sbx --version`
// never.
//
// A cgo build starts it earlier still, before Go's runtime, in a process
// its C constructor forked (ctorcopy.go): this init only sends it the
// image's offset, and falls back to the above where that fails.
func init() {
	if !startsEarly(os.Args) {
		return
	}
	early = constructorCopy()
	if !Embedded() {
		early.release()
		return
	}
	if early.ran {
		err := early.request(image)
		if err == nil {
			// The copy process makes the memfd: no goroutine copies
			// (Prepare, PrepareForExec), Get reaps it.
			startedAt = StartInConstructor
			prepared.Store(true)
			return
		}
		earlyWhy = err.Error()
	}
	if runtime.GOMAXPROCS(0) == 1 {
		startedAt = StartBeforeMain
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

// PrepareForExec starts the copy for `sbx exec` from main, before the
// CLI parses anything, where the package init did not (two Ps, see
// above); main calls it first thing.
func PrepareForExec(argv []string) {
	if Embedded() && startsEarly(argv) && startedAt == "" {
		startedAt = StartAtMain
		Prepare()
	}
}
