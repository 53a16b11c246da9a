//go:build !sbx_init_only

package nsjail

import "github.com/sbx-sandbox/sbx/seccomp"

// The supervisor's half of seccomp: compiling a policy (libseccomp, cgo)
// and naming syscall numbers. The init binary (internal/initbin, built
// with -tags sbx_init_only and no cgo) leaves this file out and has
// filter_initbin.go instead: the init only installs the BPF the
// supervisor sends it (Confine.Seccomp), and never runs a supervisor.

// compileFilter compiles the Spec's seccomp policy (milliseconds, cached
// per process), meant to run beside the init's start-up. Policy "none"
// still gets the init guard (seccomp.ForRun).
func compileFilter(name string, out chan<- compiled) {
	p, err := seccomp.ForRun(name)
	if err != nil {
		out <- compiled{err: err}
		return
	}
	f, err := seccomp.Compile(p)
	out <- compiled{f, err, f != nil && seccomp.Precompiled(f)}
}

// syscallName names syscall nr for seccomp_denials.
func syscallName(nr int) string { return seccomp.SyscallName(nr) }

// mark is the timeline's name for the filter's step: whether it came
// embedded in the binary (the built-in policies, precompiled by go
// generate) or was compiled with libseccomp during this start.
func (c compiled) mark() string {
	if c.precompiled {
		return "sbx: seccomp filter precompiled"
	}
	return "sbx: seccomp filter compiled"
}
