# prlimit(2) on the init (pid 1): read its RLIMIT_NOFILE, then set it to
# the same values (harmless even where it gets through). Prints {"get":
# ..., "set": ...}: "ok" or an errno name.
import errno, json, resource

out = {}
try:
    cur = resource.prlimit(1, resource.RLIMIT_NOFILE)
    out["get"] = "ok"
except OSError as e:
    cur = resource.getrlimit(resource.RLIMIT_NOFILE)
    out["get"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    resource.prlimit(1, resource.RLIMIT_NOFILE, cur)
    out["set"] = "ok"
except OSError as e:
    out["set"] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
