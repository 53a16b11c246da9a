package rawabi

import "golang.org/x/sys/unix"

// X32Bit is __X32_SYSCALL_BIT: a syscall number with it set is an x32
// call on x86_64 (arch/x86/include/uapi/asm/unistd.h).
const X32Bit = 0x40000000

// X32Getpid calls getpid through the x32 ABI: the SYSCALL instruction
// with x32's number for it (39, as on x86_64, plus X32Bit).
func X32Getpid() (uintptr, unix.Errno) {
	r, _, errno := unix.RawSyscall(X32Bit|unix.SYS_GETPID, 0, 0, 0)
	return r, errno
}
