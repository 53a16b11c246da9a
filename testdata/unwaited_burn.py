# unwaited_burn.py: ignore SIGCHLD, then forever fork a child that burns
# about 8 ms of CPU and exits. The kernel reaps each child at once with no
# wait, so its CPU reaches no cutime (getrusage(2), NOTES).
# unwaited_burn.py disable-perf: first try to switch off the perf counters
# attached to this process (prctl PR_TASK_PERF_EVENTS_DISABLE), which the
# supervisor's task clock is; the filter must refuse it.
import ctypes, os, signal, sys, time
if sys.argv[1:] == ["disable-perf"]:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.prctl(31, 0, 0, 0, 0)  # PR_TASK_PERF_EVENTS_DISABLE
    print("prctl(PR_TASK_PERF_EVENTS_DISABLE):", rc, os.strerror(ctypes.get_errno()) if rc else "ok", file=sys.stderr, flush=True)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
while True:
    if os.fork() == 0:
        end = time.process_time() + 0.008
        while time.process_time() < end:
            pass
        os._exit(0)
    time.sleep(0.009)
