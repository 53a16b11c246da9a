package install

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// X32SyscallBit marks an x32-ABI syscall on x86_64 (__X32_SYSCALL_BIT in
// arch/x86/include/uapi/asm/unistd.h): the kernel reports such calls with
// AUDIT_ARCH_X86_64 and nr|0x40000000, so only the number tells them apart.
const X32SyscallBit = 0x40000000

// ArchInfo names the ABIs of the native architecture: the one a filter is
// compiled for, and the others a process of it can still enter the kernel
// through, which the filter must refuse.
type ArchInfo struct {
	Native  uint32   // AUDIT_ARCH_* of the native ABI
	Foreign []uint32 // AUDIT_ARCH_* of other ABIs reachable from it
	// X32 is set where the native arch value also carries another ABI,
	// told apart by X32SyscallBit in the number.
	X32 bool
}

// NativeArch is the ABI table of the architecture sbx was built for.
func NativeArch() (ArchInfo, error) {
	switch runtime.GOARCH {
	case "amd64":
		// int 0x80 and sysenter enter as AUDIT_ARCH_I386 (ia32
		// emulation); x32 enters as x86_64 with the x32 bit set.
		return ArchInfo{Native: unix.AUDIT_ARCH_X86_64, Foreign: []uint32{unix.AUDIT_ARCH_I386}, X32: true}, nil
	case "arm64":
		return ArchInfo{Native: unix.AUDIT_ARCH_AARCH64, Foreign: []uint32{unix.AUDIT_ARCH_ARM}}, nil
	}
	return ArchInfo{}, fmt.Errorf("seccomp: no table of syscall ABIs for GOARCH=%s", runtime.GOARCH)
}
