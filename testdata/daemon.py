# daemon.py MARKER: double-fork a daemon that would sleep for an hour with
# MARKER in its argv, then exit at once.
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(3600)", sys.argv[1]])
    os._exit(0)
os.wait()
print("daemon started")
