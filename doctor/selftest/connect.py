# connect.py HOST PORT: one TCP connect with a 2 s timeout. Prints
# {"connect": "ok" | errno name | "timeout"}.
import errno, json, socket, sys

try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()
    r = "ok"
except socket.timeout:
    r = "timeout"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"connect": r}))
