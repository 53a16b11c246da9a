package rawabi

// I386Getpid is __NR_getpid of the i386 ABI
// (arch/x86/entry/syscalls/syscall_32.tbl).
const I386Getpid = 20

// Int80 makes a 32-bit syscall with int $0x80 from this 64-bit process;
// the kernel takes it as an ia32 call (AUDIT_ARCH_I386). It returns the
// raw result: a negative errno on failure.
func Int80(nr, a1, a2, a3 uintptr) uintptr
