# Tries to watch the read-only rootfs, as a payload would to learn which
# host programs run (the rootfs is a bind of the host's /usr): inotify on
# /usr/bin, and fanotify. Prints one JSON object.
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
FAN_CLASS_NOTIF = 0
fd = libc.fanotify_init(FAN_CLASS_NOTIF, os.O_RDONLY)
out["fanotify_init"] = "ok" if fd >= 0 else err()
print(json.dumps(out))
