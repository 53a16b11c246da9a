package seccomp

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// x32SyscallBit marks an x32-ABI syscall on x86_64 (__X32_SYSCALL_BIT in
// arch/x86/include/uapi/asm/unistd.h): the kernel reports such calls with
// AUDIT_ARCH_X86_64 and nr|0x40000000, so only the number tells them apart.
const x32SyscallBit = 0x40000000

// archInfo names the ABIs of the native architecture: the one a filter is
// compiled for, and the others a process of it can still enter the kernel
// through, which the filter must refuse.
type archInfo struct {
	native  uint32   // AUDIT_ARCH_* of the native ABI
	foreign []uint32 // AUDIT_ARCH_* of other ABIs reachable from it
	// x32 is set where the native arch value also carries another ABI,
	// told apart by x32SyscallBit in the number.
	x32 bool
}

func nativeArch() (archInfo, error) {
	switch runtime.GOARCH {
	case "amd64":
		// int 0x80 and sysenter enter as AUDIT_ARCH_I386 (ia32
		// emulation); x32 enters as x86_64 with the x32 bit set.
		return archInfo{native: unix.AUDIT_ARCH_X86_64, foreign: []uint32{unix.AUDIT_ARCH_I386}, x32: true}, nil
	case "arm64":
		return archInfo{native: unix.AUDIT_ARCH_AARCH64, foreign: []uint32{unix.AUDIT_ARCH_ARM}}, nil
	}
	return archInfo{}, fmt.Errorf("seccomp: no table of syscall ABIs for GOARCH=%s", runtime.GOARCH)
}
