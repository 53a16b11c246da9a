# net_direct.py HOST:PORT [NAME]: try the network without the proxy: a TCP
# connect to HOST:PORT, a UDP datagram to it, and a DNS lookup of NAME
# (default example.com). Print one JSON object saying how each went:
#   {"tcp": {"ok": false, "error": "OSError: [Errno 101] Network is unreachable", "errno": 101}, ...}
# Inside the sandbox 127.0.0.1 is the sandbox's own loopback: give the host's
# real address to test escape. A UDP send to an unreachable network fails at
# sendto; one that "succeeds" is reported with ok true for the caller to judge.
import json, socket, sys

host, _, port = sys.argv[1].rpartition(":")
host, port = host.strip("[]"), int(port)
name = sys.argv[2] if len(sys.argv) > 2 else "example.com"


def attempt(f):
    try:
        return {"ok": True, "result": f()}
    except OSError as e:  # includes socket.timeout and socket.gaierror
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "errno": e.errno}


def tcp():
    with socket.create_connection((host, port), timeout=3):
        return "connected"


def udp():
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        return f"sent {s.sendto(b'sbx', (host, port))} bytes"


def dns():
    return sorted({a[4][0] for a in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)})


print(json.dumps({"tcp": attempt(tcp), "udp": attempt(udp), "dns": attempt(dns)}))
