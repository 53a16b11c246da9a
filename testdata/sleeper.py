# sleeper.py MARKER: say ready, then sleep with MARKER in argv.
import sys, time
print("ready", flush=True)
time.sleep(3600)
