# Hold as many inotify instances as the sandbox gives (at most 1024), say
# how many on one line, then keep them until stdin closes (the host checks
# its own inotify_init1 meanwhile) or 15 s pass.
import ctypes, json, select, sys

libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 1024:
    fd = libc.inotify_init1(0o2000000)  # IN_CLOEXEC
    if fd < 0:
        break
    held.append(fd)
print(json.dumps({"held": len(held)}), flush=True)
select.select([sys.stdin], [], [], 15)
