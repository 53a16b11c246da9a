# int80.py: make a 32-bit system call (int 0x80) from this 64-bit process.
# Under sbx's seccomp filter the process is killed (SIGKILL, by the init for
# the filter; SIGSYS where the kernel gives no seccomp listener).
import ctypes, mmap
print("calling", flush=True)
code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # mov eax, 20 (i386 getpid); int 0x80; ret
m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
print(ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))())
