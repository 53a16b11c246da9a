# fork_bomb.py: fork until the kernel refuses; children sleep. Prints how
# many forks succeeded, then fails (exit 1) the way real code does when a
# fork is refused.
import os, sys, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print(f"forked {n}, then {type(e).__name__}: {e}", flush=True)
    sys.exit(1)
