# denial_flood.py: make 100,000 denied system calls, each with a number
# of its own (none of them exists), then exit 0. Under a filter that
# counts denials, every distinct number was once a key of the init's exit
# message, which grew past what sbx would read, and sbx hung (issue 11).
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
failed = 0
for i in range(n):
    if libc.syscall(ctypes.c_long(1000000 + i)) == -1:
        failed += 1
print(failed, flush=True)
