# x32.py: make a system call through the x32 ABI (getpid with the x32 bit,
# __X32_SYSCALL_BIT) from this 64-bit process. Under sbx's seccomp filter
# the process is killed (SIGKILL, by the init for the filter; SIGSYS where
# the kernel gives no seccomp listener); without one, a kernel built
# without CONFIG_X86_X32_ABI answers ENOSYS (-1).
import ctypes
print("calling", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
print(libc.syscall(ctypes.c_long(0x40000000 | 39)))
