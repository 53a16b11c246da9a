# Tries to reach the binary the sandbox's init runs (sbx-init, from a
# sealed memfd; issue 13, the CVE-2019-5736 lesson) from inside: through
# /proc/1/exe, /proc/1/fd, /proc/1/map_files and /proc/1/mem, and looks
# for any memfd among the fds and mappings it can see. Prints one JSON
# line (attempt -> "ok" or the errno name, "memfds" -> what it found),
# then waits to be ended (the test checks the host's side meanwhile).
import errno, json, os, sys, time

out = {}


def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))


for mode, flag in (("O_RDONLY", os.O_RDONLY), ("O_WRONLY", os.O_WRONLY), ("O_RDWR", os.O_RDWR)):
    attempt(f"open /proc/1/exe {mode}", lambda flag=flag: os.close(os.open("/proc/1/exe", flag)))
attempt("readlink /proc/1/exe", lambda: os.readlink("/proc/1/exe"))
attempt("listdir /proc/1/fd", lambda: os.listdir("/proc/1/fd"))
attempt("listdir /proc/1/map_files", lambda: os.listdir("/proc/1/map_files"))
attempt("open /proc/1/mem", lambda: os.close(os.open("/proc/1/mem", os.O_RDONLY)))
attempt("read /proc/1/maps", lambda: open("/proc/1/maps").read() or (_ for _ in ()).throw(OSError(errno.ENODATA, "empty")))

memfds = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if "memfd" in link:
                memfds.append(f"{pid}/fd/{fd} {link}")
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            memfds += [f"{pid}/maps {l.strip()}" for l in f if "memfd" in l]
    except OSError:
        pass
out["memfds"] = memfds
print(json.dumps(out), flush=True)
time.sleep(120)
