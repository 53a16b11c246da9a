# Writes that the mounts allow and that Landlock must refuse (/proc/self
# files), beside the ones every payload needs (workspace, /tmp, /dev/shm,
# /dev/null, renames between directories, a loopback server). Prints one
# JSON object: what -> "ok" or the errno name.
import errno, json, os, socket

r = {}


def t(name, f):
    try:
        f()
        r[name] = "ok"
    except OSError as e:
        r[name] = errno.errorcode.get(e.errno, str(e.errno))


def write(path, data="x"):
    with open(path, "w") as f:
        f.write(data)


t("workspace", lambda: write("/workspace/out.txt"))
t("tmp", lambda: write("/tmp/a"))
t("shm", lambda: write("/dev/shm/a"))
t("devnull", lambda: write("/dev/null"))
t("proc_comm", lambda: write("/proc/self/comm", "renamed"))
t("proc_oom_score_adj", lambda: write("/proc/self/oom_score_adj", "500"))
t("rootfs", lambda: write("/usr/sbx-landlock-probe"))
os.makedirs("/workspace/d1")
os.makedirs("/workspace/d2")
write("/workspace/d1/f")
t("rename", lambda: os.rename("/workspace/d1/f", "/workspace/d2/f"))


def loopback():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    socket.create_connection(s.getsockname(), timeout=5).close()


t("loopback", loopback)
print(json.dumps(r))
