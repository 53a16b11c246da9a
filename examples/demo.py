# The sbx demo: what does a sandboxed script see?
import os, socket, sys

def attempt(what, fn):
    try:
        fn()
        print(f"  {what:<38} allowed")
    except OSError as e:
        print(f"  {what:<38} refused ({e.strerror})")

print(f"Python {sys.version.split()[0]} as uid {os.getuid()} on host '{socket.gethostname()}', in {os.getcwd()}")
print(f"  processes visible: {sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}")
print(f"  network interfaces: {[l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]}")
attempt("write /workspace/result.txt", lambda: open("/workspace/result.txt", "w").write("42"))
attempt("write /usr/lib/evil", lambda: open("/usr/lib/evil", "w"))
attempt("read /etc/shadow", lambda: open("/etc/shadow").read())
attempt("connect to 1.1.1.1:443", lambda: socket.create_connection(("1.1.1.1", 443), timeout=1))
