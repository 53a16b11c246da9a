# unwaited_burn.py: ignore SIGCHLD, then forever fork a child that burns
# about 8 ms of CPU and exits. The kernel reaps each child at once with no
# wait, so its CPU reaches no cutime (getrusage(2), NOTES).
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
while True:
    if os.fork() == 0:
        end = time.process_time() + 0.008
        while time.process_time() < end:
            pass
        os._exit(0)
    time.sleep(0.009)
