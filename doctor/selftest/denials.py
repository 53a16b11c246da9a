# denials.py N: N calls of N distinct syscall numbers that no kernel has
# (1000000 + i), each refused by the filter. Prints {"calls": N, "refused": M}.
import ctypes, json, sys

n = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
refused = sum(1 for i in range(n) if libc.syscall(ctypes.c_long(1000000 + i)) == -1)
print(json.dumps({"calls": n, "refused": refused}))
