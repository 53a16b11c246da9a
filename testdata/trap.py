# trap.py: say ready, then wait for SIGINT, SIGTERM, SIGHUP or SIGQUIT
# and report it.
import signal, sys, time
def handler(sig, frame):
    print("got", signal.Signals(sig).name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, handler)
signal.signal(signal.SIGTERM, handler)
signal.signal(signal.SIGHUP, handler)
signal.signal(signal.SIGQUIT, handler)
print("ready", flush=True)
time.sleep(30)
print("no signal came")
sys.exit(1)
