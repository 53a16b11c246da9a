# connect.py PORT: try TCP to the host's 127.0.0.1:PORT.
import json, socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print(json.dumps({"connected": True}))
except OSError as e:
    print(json.dumps({"connected": False, "error": type(e).__name__}))
