# Opens pseudo-terminals of the sandbox's own devpts: os.openpty, a round
# trip through the line discipline, pty.spawn of a program whose output is
# read back, and TIOCSTI (which must stay refused) on both ends. Prints
# one JSON object.
import errno
import fcntl
import json
import os
import pty
import tempfile
import termios

out = {"pts_before": sorted(os.listdir("/dev/pts"))}
master, slave = os.openpty()
out["ttyname"] = os.ttyname(slave)
out["isatty"] = os.isatty(slave)
os.write(master, b"ping\n")
out["echo"] = os.read(slave, 100).decode()
attrs = termios.tcgetattr(slave)
termios.tcsetattr(slave, termios.TCSANOW, attrs)
termios.tcdrain(slave)
for name, fd in (("slave", slave), ("master", master)):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        out["tiocsti_" + name] = "allowed"
    except OSError as e:
        out["tiocsti_" + name] = errno.errorcode.get(e.errno, str(e.errno))

# pty.spawn copies the child's terminal output to our stdout: send it to a
# file for the duration.
with tempfile.TemporaryFile() as f:
    saved = os.dup(1)
    os.dup2(f.fileno(), 1)
    try:
        status = pty.spawn(["/bin/sh", "-c", "tty; echo spawned"])
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    f.seek(0)
    out["spawn_output"] = f.read().decode()
    out["spawn_status"] = status
print(json.dumps(out))
