//go:build cgo

package seccomp

import (
	"errors"
	"fmt"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// newerSyscalls are syscalls younger than the libseccomp sbx links
// (Debian 12's 2.5.4 knows up to futex_wake, Linux 6.7). Since Linux 5.1
// every architecture but alpha gives a new syscall the same number
// (include/uapi/asm-generic/unistd.h), so one table serves amd64 and arm64;
// the tests compare it with golang.org/x/sys/unix. libseccomp's own answer
// wins where it has one.
var newerSyscalls = map[string]int{
	"futex_wait":        455,
	"futex_requeue":     456,
	"statmount":         457,
	"listmount":         458,
	"lsm_get_self_attr": 459,
	"lsm_set_self_attr": 460,
	"lsm_list_modules":  461,
	"mseal":             462,
	"setxattrat":        463,
	"getxattrat":        464,
	"listxattrat":       465,
	"removexattrat":     466,
	"open_tree_attr":    467,
	"file_getattr":      468,
	"file_setattr":      469,
	"listns":            470,
}

// otherArches are consulted to tell a syscall that merely does not exist
// here (arch_prctl on arm64, open on arm64) from a misspelt name.
var otherArches = []libseccomp.ScmpArch{libseccomp.ArchAMD64, libseccomp.ArchX86, libseccomp.ArchARM64, libseccomp.ArchARM}

var errNotNative = errors.New("not a syscall of the native architecture")

// SyscallNumber returns the native architecture's number for a syscall
// name.
func SyscallNumber(name string) (int, error) {
	nr, err := libseccomp.GetSyscallFromNameByArch(name, libseccomp.ArchNative)
	// libseccomp gives multiplexed calls (socketcall's socket on i386)
	// negative pseudo-numbers; they are no syscall of their own here.
	if err == nil && nr >= 0 {
		return int(nr), nil
	}
	if n, ok := newerSyscalls[name]; ok {
		return n, nil
	}
	for _, a := range otherArches {
		if _, err := libseccomp.GetSyscallFromNameByArch(name, a); err == nil {
			return -1, fmt.Errorf("syscall %s: %w", name, errNotNative)
		}
	}
	return -1, fmt.Errorf("syscall %q: unknown to libseccomp and to sbx's table of newer syscalls", name)
}

// SyscallName returns the native architecture's name for syscall number
// nr, or "syscall_N" when neither libseccomp nor sbx knows it.
func SyscallName(nr int) string {
	if nr >= 0 {
		if name, err := libseccomp.ScmpSyscall(nr).GetNameByArch(libseccomp.ArchNative); err == nil && name != "" {
			return name
		}
		for name, n := range newerSyscalls {
			if n == nr {
				return name
			}
		}
	}
	return fmt.Sprintf("syscall_%d", nr)
}
