//go:build sbx_init_only

package nsjail

import (
	"errors"
	"fmt"
)

// The init binary's stand-ins for filter_compile.go: it is built without
// libseccomp (internal/initbin, issue 13) and only ever runs Init, so the
// supervisor's compile is never reached there. Should it be, it fails
// closed: no filter, so no sandbox.

var errInitOnly = errors.New("this binary is sbx's sandbox init only: it compiles no seccomp policy (build sbx itself)")

func compileFilter(name string, out chan<- compiled) {
	out <- compiled{err: fmt.Errorf("seccomp policy %q: %w", name, errInitOnly)}
}

func syscallName(nr int) string { return fmt.Sprintf("syscall_%d", nr) }

func (c compiled) mark() string { return "sbx: seccomp filter not compiled (init binary)" }
