# Tries to reach the sandbox's init (pid 1) from inside, in one of two
# modes (argv[1]); prints one JSON object: attempt -> "ok" or the errno
# name.
#
# "process" (TestPayloadCannotReachInit): the ways a same-uid process
# could reach the init itself: limits, signals, scheduling, /proc/1
# writes, on pid 1 and on every thread of the init (each has a tid of
# its own). Writes a file first: the workspace report must still list it.
#
# "exe" (TestInitBinarySealed): the binary the init runs (sbx-init, from
# a sealed memfd; issue 13, the CVE-2019-5736 lesson): through
# /proc/1/exe, /proc/1/fd, /proc/1/map_files and /proc/1/mem, and looks
# for any memfd among the fds and mappings it can see ("memfds" -> what
# it found); then waits to be ended (the test checks the host's side
# meanwhile).
import ctypes, errno, json, os, resource, sys, time

out = {}


def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))


def reach_process():
    with open("before.txt", "w") as f:
        f.write("written before the attempts\n")
    tids = sorted(int(t) for t in os.listdir("/proc/1/task"))
    for tid in tids:
        for res in ("RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC"):
            attempt(f"prlimit {tid} {res}", lambda: resource.prlimit(tid, getattr(resource, res), (0, 0)))
    attempt("kill 1 SIGTERM", lambda: os.kill(1, 15))
    attempt("kill 1 0", lambda: os.kill(1, 0))
    attempt("pidfd_open 1", lambda: os.close(os.pidfd_open(1)))
    attempt("sched_setaffinity 1", lambda: os.sched_setaffinity(1, {0}))
    attempt("sched_setscheduler 1", lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))
    attempt("setpriority 1", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
    attempt("setpriority user", lambda: os.setpriority(os.PRIO_USER, 0, 19))
    libc = ctypes.CDLL(None, use_errno=True)

    def tgkill():
        if libc.syscall(234, 1, tids[-1], 10) != 0:  # tgkill(1, tid, SIGUSR1), x86_64
            raise OSError(ctypes.get_errno(), "tgkill")

    if os.uname().machine == "x86_64":
        attempt("tgkill 1", tgkill)
    for tid in tids:
        for f in ("oom_score_adj", "oom_adj", "coredump_filter", "comm", "timerslack_ns", "clear_refs", "attr/current", "sched", "autogroup"):
            def write(tid=tid, f=f):
                with open(f"/proc/{tid}/{f}", "w") as fh:
                    fh.write("1000\n")
            attempt(f"write /proc/{tid}/{f}", write)
    print(json.dumps(out))


def reach_exe():
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


{"process": reach_process, "exe": reach_exe}[sys.argv[1]]()
