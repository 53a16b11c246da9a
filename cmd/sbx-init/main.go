//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command sbx-init is a sandbox's init (pid 1 of its namespaces) and
// nothing else: nsjail.Init without the supervisor's dependencies. sbx
// embeds it and execs it from a sealed memfd (internal/initbin); it is
// never installed or run by hand. `make sbx` builds it with CGO_ENABLED=0
// and -tags sbx_init_only, which leaves out nsjail's libseccomp half
// (nsjail/filter_compile.go): the init installs the BPF the supervisor
// compiled and sent, it compiles nothing (issue 13). Without that tag
// it links libseccomp like sbx does (and needs cgo), which works but
// saves nothing.
package main

import (
	"fmt"
	"os"

	"github.com/sbx-sandbox/sbx/nsjail"
)

func main() {
	if !nsjail.IsInit() {
		// internal/initbin's Probe (sbx doctor) expects this line and
		// status 2.
		fmt.Fprintln(os.Stderr, "sbx-init: this is the sandbox init that sbx runs as pid 1 of a new sandbox; run sbx instead")
		os.Exit(2)
	}
	nsjail.Init()
}
