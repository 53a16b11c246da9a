# fork_burn.py: forever, fork a child that burns about 8 ms of CPU and
# exits, then reap it. Each child lives less than the CPU total's poll
# interval: only its parent's cutime ever shows its time.
import os, time
while True:
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.008
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
