# privs.py: what can the payload do to its own privileges and to the init?
import ctypes, errno, json, os, subprocess

libc = ctypes.CDLL(None, use_errno=True)
PR_GET_SECUREBITS = 27
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
PTRACE_ATTACH = 16

def err_of(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def call(rc):
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

out = {
    "securebits": libc.prctl(PR_GET_SECUREBITS, 0, 0, 0, 0),
    "ambient_raise": call(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 21, 0, 0)),
    "ptrace_init": call(libc.ptrace(PTRACE_ATTACH, 1, None, None)),
    "init_exe": err_of(lambda: os.readlink("/proc/1/exe")),
    "init_mem": err_of(lambda: open("/proc/1/mem", "rb").read(1)),
    "init_environ": err_of(lambda: open("/proc/1/environ", "rb").read()),
    "max_user_namespaces": open("/proc/sys/user/max_user_namespaces").read().strip(),
    "unshare_cmd": subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode,
    "setuid0": err_of(lambda: os.setuid(0)),
}
print(json.dumps(out))
