"""seccomp probe: try each syscall of sbx's issue 4 and print what happened.

Prints one JSON object on stdout, {"probe": result}, where result is "ok",
an errno name ("EPERM", "ENOSYS", ...) or "killed:SIGKILL" (or "killed:SIGSYS" without a listener) when the call
killed the process that made it. A key is "syscall" or "syscall:variant";
the part before the first ":" is the syscall's name ("int0x80" and "x32"
are the two other ABIs).

Every call runs in a forked child, so that nothing it does (a new user
namespace, a changed personality, a kill by the filter) reaches the probe
itself, and it passes arguments that are harmless even outside a sandbox,
as root: missing paths, bad fds, NULL buffers, read-only queries. Under a
seccomp filter the arguments do not matter: the filter answers first.
x86_64 only (the syscall numbers below are x86_64's).
"""

import ctypes
import errno
import json
import mmap
import os
import platform
import signal
import sys

if platform.machine() != "x86_64":
    sys.exit("seccomp_probe.py: x86_64 only, this is " + platform.machine())

# x86_64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl).
NR = {
    "getpid": 39, "socket": 41, "clone": 56, "ioctl": 16, "ptrace": 101, "syslog": 103,
    "personality": 135, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "pivot_root": 155, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
    "quotactl_fd": 443, "mount_setattr": 442,
}

AT_FDCWD = -100
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
AF = {"AF_PACKET": 17, "AF_NETLINK": 16, "AF_BLUETOOTH": 31, "AF_VSOCK": 40, "AF_ALG": 38,
      "AF_KEY": 15, "AF_CAN": 29, "AF_XDP": 44, "AF_UNSPEC": 0}
NOWHERE = b"/nonexistent-sbx-probe"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def arg(a):
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    if isinstance(a, int):
        return ctypes.c_long(a) if a < 1 << 63 else ctypes.c_ulong(a)
    return a


def raw(nr, *args):
    """syscall(2) returning the result, or -errno."""
    ctypes.set_errno(0)
    r = libc.syscall(arg(nr), *[arg(a) for a in args])
    return -ctypes.get_errno() if r == -1 else r


def call(name, *args):
    return raw(NR[name], *args)


def in_child(fn):
    """Run fn in a forked child; fn returns a raw result (>= 0 or -errno)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            res = fn()
            out = "ok" if res >= 0 else errno.errorcode.get(-res, "errno%d" % -res)
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 64).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed:" + signal.Signals(os.WTERMSIG(status)).name
    return out or "exit:%d" % os.WEXITSTATUS(status)


def clone_newuser():
    # Raw clone with fork-like flags plus CLONE_NEWUSER: should it work,
    # the new process returns 0 here and leaves at once.
    r = call("clone", CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    return r


def int80():
    # mov eax, 20 (getpid in the i386 table); int 0x80; ret
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
    m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()


def ioctl_on(path_or_fd, req):
    def f():
        fd = path_or_fd if isinstance(path_or_fd, int) else os.open(path_or_fd, os.O_RDWR | os.O_NOCTTY)
        # NULL argument: where the kernel gets as far as reading it, the
        # read fails (EFAULT) and nothing reaches a terminal.
        return call("ioctl", fd, req, 0)
    return f


def personality(p):
    return lambda: call("personality", p)


iov = (ctypes.c_char * 8)()
timex = (ctypes.c_char * 256)()  # struct timex, modes = 0: a read-only query
ts = (ctypes.c_long * 2)(0, 0)
uring_params = (ctypes.c_char * 120)()

PROBES = {
    # Control calls that every policy allows.
    "getpid": lambda: call("getpid"),
    "socket:AF_UNIX": lambda: call("socket", 1, 1, 0),
    "socket:AF_INET": lambda: call("socket", 2, 2, 0),
    # The issue 4 list.
    "ptrace:PTRACE_TRACEME": lambda: call("ptrace", 0, 0, 0, 0),
    "process_vm_readv": lambda: call("process_vm_readv", os.getpid(), iov, 0, iov, 0, 0),
    "process_vm_writev": lambda: call("process_vm_writev", os.getpid(), iov, 0, iov, 0, 0),
    "mount": lambda: call("mount", b"none", NOWHERE, b"tmpfs", 0, 0),
    "umount2": lambda: call("umount2", NOWHERE, 0),
    "pivot_root": lambda: call("pivot_root", NOWHERE, NOWHERE),
    "chroot": lambda: call("chroot", NOWHERE),
    "fsopen": lambda: call("fsopen", b"sbx-probe-no-such-fs", 0),
    "fsmount": lambda: call("fsmount", -1, 0, 0),
    "fsconfig": lambda: call("fsconfig", -1, 0, 0, 0, 0),
    "fspick": lambda: call("fspick", AT_FDCWD, NOWHERE, 0),
    "move_mount": lambda: call("move_mount", -1, b"", -1, b"", 0),
    "open_tree": lambda: call("open_tree", AT_FDCWD, NOWHERE, 0),
    "mount_setattr": lambda: call("mount_setattr", -1, b"", 0, 0, 0),
    "unshare:CLONE_NEWUSER": lambda: call("unshare", CLONE_NEWUSER),
    "setns": lambda: call("setns", -1, 0),
    "clone:CLONE_NEWUSER": clone_newuser,
    "clone3": lambda: call("clone3", 0, 0),
    "bpf": lambda: call("bpf", 0, 0, 0),
    "perf_event_open": lambda: call("perf_event_open", 0, 0, -1, -1, 0),
    "userfaultfd": lambda: call("userfaultfd", os.O_CLOEXEC),
    "io_uring_setup": lambda: call("io_uring_setup", 1, uring_params),
    "io_uring_enter": lambda: call("io_uring_enter", -1, 0, 0, 0, 0, 0),
    "io_uring_register": lambda: call("io_uring_register", -1, 0, 0, 0),
    "keyctl": lambda: call("keyctl", 0, -3, 0),  # KEYCTL_GET_KEYRING_ID, session, no create
    "add_key": lambda: call("add_key", 0, 0, 0, 0, 0),
    "request_key": lambda: call("request_key", b"user", b"sbx-probe-no-such-key", 0, 0),
    "kexec_load": lambda: call("kexec_load", 0, 0, 0, 0xFFFFFFFF),
    "kexec_file_load": lambda: call("kexec_file_load", -1, -1, 0, 0, 0xFFFFFFFF),
    "init_module": lambda: call("init_module", 0, 0, 0),
    "finit_module": lambda: call("finit_module", -1, b"", 0),
    "delete_module": lambda: call("delete_module", b"sbx_probe_no_such_module", os.O_NONBLOCK),
    "reboot": lambda: call("reboot", 0, 0, 0, 0),  # bad magic
    "swapon": lambda: call("swapon", NOWHERE, 0),
    "swapoff": lambda: call("swapoff", NOWHERE),
    "acct": lambda: call("acct", NOWHERE + b"/x"),
    "quotactl": lambda: call("quotactl", 0, 0, 0, 0),
    "quotactl_fd": lambda: call("quotactl_fd", -1, 0, 0, 0),
    "open_by_handle_at": lambda: call("open_by_handle_at", -1, 0, 0),
    "name_to_handle_at": lambda: call("name_to_handle_at", AT_FDCWD, NOWHERE, 0, 0, 0),
    "iopl": lambda: call("iopl", 0),  # level 0 is where it starts
    "ioperm": lambda: call("ioperm", 0, 0, 0),
    "syslog": lambda: call("syslog", 10, 0, 0),  # SYSLOG_ACTION_SIZE_BUFFER
    "settimeofday": lambda: call("settimeofday", 0, 0),  # both NULL: changes nothing
    "clock_settime": lambda: call("clock_settime", 1, ts),  # CLOCK_MONOTONIC cannot be set
    "clock_adjtime": lambda: call("clock_adjtime", 0, timex),
    "adjtimex": lambda: call("adjtimex", timex),
    "personality:ADDR_NO_RANDOMIZE": personality(0x0040000),
    "personality:PER_LINUX32": personality(0x0008),
    "personality:READ_IMPLIES_EXEC": personality(0x0400000),
    "personality:query": personality(0xFFFFFFFF),
    "ioctl:TIOCSTI:stdin": ioctl_on(0, TIOCSTI),
    "ioctl:TIOCSTI:/dev/null": ioctl_on("/dev/null", TIOCSTI),
    "ioctl:TIOCSTI:upper-bits": ioctl_on("/dev/null", TIOCSTI | 1 << 32),
    "ioctl:TIOCLINUX:/dev/null": ioctl_on("/dev/null", TIOCLINUX),
    "int0x80": int80,
    "x32:getpid": lambda: raw(X32_SYSCALL_BIT | NR["getpid"]),
}
for fam, n in AF.items():
    PROBES["socket:" + fam] = (lambda n: lambda: call("socket", n, 3, 0))(n)  # SOCK_RAW
if hasattr(os, "unshare"):  # Python 3.12+
    def os_unshare():
        try:
            os.unshare(CLONE_NEWUSER)
            return 0
        except OSError as e:
            return -e.errno
    PROBES["unshare:os.unshare"] = os_unshare

results = {name: in_child(fn) for name, fn in PROBES.items()}
print(json.dumps(results, sort_keys=True))
