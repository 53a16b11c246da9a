"""Runs argv[1:] under a seccomp filter that fails memfd_create(2) with
EPERM, as a host (a container runtime's profile, an LSM, vm.memfd_noexec=2)
that refuses memfds would: TestLeanHandOffFailureIsReported (sbx serve,
which the lean sbx hands to the full one from a memfd, cannot start). The
filter is set with no_new_privs (seccomp(2): needed without CAP_SYS_ADMIN)
and is inherited by everything argv[1] starts."""
import ctypes
import os
import platform
import struct
import sys

NR = {"x86_64": 319, "aarch64": 279}[platform.machine()]
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1

# ld nr; jeq memfd_create ? errno(EPERM) : allow
prog = [
    (BPF_LD_W_ABS, 0, 0, 0),
    (BPF_JEQ_K, 0, 1, NR),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
]
buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


libc = ctypes.CDLL(None, use_errno=True)
fprog = SockFprog(len(prog), ctypes.addressof(buf))
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    sys.exit("no_memfd.py: prctl: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
