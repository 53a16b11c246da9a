# Tries to watch the read-only rootfs, as a payload would to learn which
# host programs run (the rootfs is a bind of the host's /usr): inotify and
# fanotify on /usr/bin. Prints one JSON object.
import ctypes
import errno
import json
import os

libc = ctypes.CDLL(None, use_errno=True)


def err():
    return errno.errorcode.get(ctypes.get_errno(), "?")


out = {}
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0:
    out["inotify_init1"] = err()
else:
    out["inotify_init1"] = "ok"
    IN_OPEN, IN_ACCESS = 0x20, 0x1
    wd = libc.inotify_add_watch(fd, b"/usr/bin", IN_OPEN | IN_ACCESS)
    out["inotify_add_watch"] = "ok" if wd >= 0 else err()
    os.close(fd)
# FAN_REPORT_FID: the mode unprivileged users may have since Linux 5.13
# (inode marks only, fanotify(7)).
FAN_CLASS_NOTIF, FAN_REPORT_FID = 0, 0x200
fd = libc.fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, os.O_RDONLY)
if fd < 0:
    out["fanotify_init"] = err()
else:
    out["fanotify_init"] = "ok"
    FAN_MARK_ADD, FAN_OPEN, AT_FDCWD = 0x1, 0x20, -100
    r = libc.fanotify_mark(fd, FAN_MARK_ADD, ctypes.c_uint64(FAN_OPEN), AT_FDCWD, b"/usr/bin")
    out["fanotify_mark"] = "ok" if r == 0 else err()
    os.close(fd)
print(json.dumps(out))
