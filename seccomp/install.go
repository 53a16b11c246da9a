package seccomp

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/seccomp/install"
)

// What the sandbox init needs of seccomp lives in seccomp/install, which
// builds without cgo (the init binary links no libseccomp, issue 13);
// these names keep the package's API and its own code as they were.

// Filter is a compiled policy (install.Filter).
type Filter = install.Filter

// Load installs f on the calling thread (install.Load).
func Load(f *Filter) (listener int, err error) { return install.Load(f) }

// Serve answers f's notifications (install.Serve).
func Serve(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error) error {
	return install.Serve(ctx, listener, f, count, hold)
}

// ServeAndKill is Serve that reports the processes it killed
// (install.ServeAndKill).
func ServeAndKill(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error, killed func(tgid int)) error {
	return install.ServeAndKill(ctx, listener, f, count, hold, killed)
}

type (
	archInfo    = install.ArchInfo
	seccompData = install.Data
)

const x32SyscallBit = install.X32SyscallBit

func nativeArch() (archInfo, error) { return install.NativeArch() }

func decodeBPF(prog []byte) ([]unix.SockFilter, error) { return install.DecodeBPF(prog) }

func runBPF(insns []unix.SockFilter, d *seccompData) (uint32, error) { return install.RunBPF(insns, d) }
