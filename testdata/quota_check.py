# Run on the host, as the user who started sbx: can it still make an
# inotify instance and queue a real-time signal? Prints one JSON object,
# "ok" or the errno name for each.
import ctypes, errno, json, os, signal

libc = ctypes.CDLL(None, use_errno=True)


class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


def res(r):
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


out = {"inotify_init1": res(libc.inotify_init1(0))}
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
out["sigqueue"] = res(libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(0)))
print(json.dumps(out))
