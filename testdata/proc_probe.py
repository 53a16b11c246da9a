# Probes /proc from inside: what the masked paths give to a reader and a
# writer, that the masks cannot be removed, and that the ordinary files
# programs need still read. Prints one JSON object.
import ctypes
import errno
import json
import os
import sys


def read(path):
    try:
        with open(path, "rb") as f:
            return {"bytes": len(f.read(1 << 20))}
    except FileNotFoundError:
        return {"absent": True}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e.errno))}


def listdir(path):
    try:
        return {"entries": len(os.listdir(path))}
    except FileNotFoundError:
        return {"absent": True}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e.errno))}


def write(path, data):
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return {"absent": True}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e.errno))}
    try:
        os.write(fd, data)
        return {"written": True}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e.errno))}
    finally:
        os.close(fd)


files, dirs, writes = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3].split(",")
libc = ctypes.CDLL(None, use_errno=True)
umount = {}
for p in ("/proc/iomem", "/proc/sys", "/proc/acpi"):
    r = libc.umount2(p.encode(), 2)  # MNT_DETACH
    umount[p] = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
# mountinfo(5): field 5 is the mount point, field 6 its per-mount options.
mounts = {}
with open("/proc/self/mountinfo") as f:
    for line in f:
        fields = line.split()
        mounts[fields[4]] = fields[5]
print(json.dumps({
    "mounts": mounts,
    "files": {p: read(p) for p in files},
    "dirs": {p: listdir(p) for p in dirs},
    "writes": {p: write(p, b"0\n") for p in writes},
    "umount": umount,
    "still_readable": {p: read(p) for p in ("/proc/self/status", "/proc/cpuinfo", "/proc/meminfo", "/proc/sys/kernel/hostname", "/proc/stat")},
}))
