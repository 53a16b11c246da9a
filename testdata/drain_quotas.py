# Takes as much as it can of the per-user kernel quotas that the kernel
# also charges to the user who started sbx: inotify instances and queued
# real-time signals. Prints "ready INOTIFY SIGNALS" once it holds them,
# then waits to be killed, so that the host can check what is left.
import ctypes, os, signal, sys, time

libc = ctypes.CDLL(None, use_errno=True)


class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


fds = []
while len(fds) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)

sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
queued = 0
while queued < 200000 and libc.sigqueue(os.getpid(), sig, sigval(0)) == 0:
    queued += 1

print("ready", len(fds), queued, flush=True)
time.sleep(60)
