# /proc exposure. Prints {"path": result} where result is an errno name,
# "empty" (read gave nothing: a masked file), "read N bytes", or, for
# writes, "masked" (/dev/null bound over it) or "opened for writing". Nothing is ever written: a file that opens
# for writing is closed at once (a write to /proc/sysrq-trigger would act
# on the host).
import errno, json, os, stat

out = {}


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


for p in ["/proc/kcore", "/proc/iomem", "/proc/timer_list", "/proc/sched_debug", "/proc/keys"]:
    try:
        with open(p, "rb") as f:
            n = len(f.read(4096))
        out[p] = "read %d bytes" % n if n else "empty"
    except OSError as e:
        out[p] = err(e)
null = os.stat("/dev/null").st_rdev
for p in ["/proc/sysrq-trigger", "/proc/sys/kernel/domainname", "/proc/sys/vm/swappiness", "/proc/sys/kernel/core_pattern"]:
    try:
        fd = os.open(p, os.O_WRONLY)
        st = os.fstat(fd)
        os.close(fd)
        # Masked the way container runtimes mask /proc files: /dev/null
        # bound over it, where a write goes nowhere.
        out[p] = "masked" if stat.S_ISCHR(st.st_mode) and st.st_rdev == null else "opened for writing"
    except OSError as e:
        out[p] = err(e)
print(json.dumps(out))
