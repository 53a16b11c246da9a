package initbin

import (
	"os"
	"runtime"
)

// early is set when the copy was started from the package init.
var early bool

// An `sbx exec` makes exactly one sandbox and needs the memfd for it
// within a few milliseconds: its copy (~2 ms of a CPU for 2.9 MB on the
// dev machine) is started here, before main, so that it runs beside the
// package inits and the CLI's flag parsing and profile merge, instead of
// from newSupervisor, after them, where the clone waited ~2-3 ms for it
// (issue 13). Package inits run before main (the spec's "Package
// initialization"); this one needs only os, runtime and x/sys/unix. Every
// other command makes the memfd when a sandbox first needs it (Prepare,
// Get): `sbx serve` once for all its sandboxes, `sbx doctor` for its
// probe, `sbx --version` never.
func init() {
	if Embedded() && startsEarly(os.Args) {
		early = true
		Prepare()
		// With one P (internal/leanexec: an unprivileged exec) the new
		// goroutine would wait until the main one blocks, which the
		// CPU-bound inits and flag parsing hardly do: yield once, so
		// that it starts its copy, a syscall that lets the P go back to
		// main (the runtime hands a P held in a syscall to another M).
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
