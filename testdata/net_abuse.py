# net_abuse.py URL: misbehave against the proxy, then check it still
# serves: silent connections, garbage, one over the connection cap, and a
# normal request at the end. Prints one JSON object.
import json, socket, sys, time, urllib.request

PROXY = ("127.0.0.1", 3128)
out = {}
silent = [socket.create_connection(PROXY) for _ in range(2)]
g = socket.create_connection(PROXY)
g.sendall(b"\x16\x03\x01garbage\r\n\r\n\x00\xff" * 10)
g.settimeout(5)
try:
    out["garbage_reply"] = g.recv(64).split(b"\r\n")[0].decode("latin-1")
except OSError as e:
    out["garbage_reply"] = type(e).__name__
g.close()
time.sleep(0.2)
# The cap is 3: two silent ones are still open, so this fits.
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        out["within_cap"] = r.status
except Exception as e:
    out["within_cap"] = f"{type(e).__name__}: {e}"
# The client has the whole response before the proxy has ended that
# session: give it a moment, or `more` may be the one over the cap.
time.sleep(0.3)
more = [socket.create_connection(PROXY) for _ in range(1)]
# Now three are open: one more must be refused at once, not hang.
t0 = time.time()
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        out["over_cap"] = r.status
except urllib.error.HTTPError as e:
    out["over_cap"] = e.code
except Exception as e:
    out["over_cap"] = type(e).__name__
out["over_cap_seconds"] = round(time.time() - t0, 2)
for s in silent + more:
    s.close()
time.sleep(0.3)
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    out["after"] = r.status
print(json.dumps(out))
