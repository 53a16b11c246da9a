# SIGTERM, then SIGKILL, to the init (pid 1), then a last word: printed only
# if the payload outlived them, and reported only if the init did.
import errno, json, os, signal, time

out = {}
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.kill(1, sig)
        out[sig.name] = "sent"
    except OSError as e:
        out[sig.name] = errno.errorcode.get(e.errno, str(e.errno))
time.sleep(0.3)
out["after"] = True
print(json.dumps(out))
