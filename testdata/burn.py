# burn.py N [SECONDS]: N processes burning CPU, for SECONDS of wall time
# (forever by default).
import os, sys, time
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
until = time.time() + float(sys.argv[2]) if len(sys.argv) > 2 else float("inf")
for _ in range(n - 1):
    if os.fork() == 0:
        break
while time.time() < until:
    pass
