# dns_client.py NAME PORT [CAFILE]: reach NAME:PORT without the proxy (the
# proxy variables are deleted first) by http.client, a raw socket and
# urllib, over TLS when CAFILE is given; then try what must fail: a name
# not on the list, NAME on port 81 (not allowed), the metadata address and
# an IP literal. Print one JSON object, one entry per attempt:
#   {"http.client": {"ok": true, "status": 200, "body": "..."}, "nx": {"ok": false, "error": "gaierror: ..."}, ...}
import http.client, json, os, socket, ssl, sys, urllib.request

for k in list(os.environ):
    if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        del os.environ[k]
name, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile=sys.argv[3]) if len(sys.argv) > 3 else None
scheme = "https" if ctx else "http"


def attempt(f):
    try:
        return {"ok": True, **f()}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def httpclient():
    if ctx:
        c = http.client.HTTPSConnection(name, port, timeout=10, context=ctx)
    else:
        c = http.client.HTTPConnection(name, port, timeout=10)
    c.request("GET", "/")
    r = c.getresponse()
    return {"status": r.status, "body": r.read().decode()}


def raw():
    s = socket.create_connection((name, port), timeout=10)
    if ctx:
        s = ctx.wrap_socket(s, server_hostname=name)
    s.sendall(f"GET / HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return {"status": int(head.split()[1]), "body": body.decode()}


def url():
    with urllib.request.urlopen(f"{scheme}://{name}:{port}/", timeout=10, context=ctx) as r:
        return {"status": r.status, "body": r.read().decode()}


def connect(host, p):
    def f():
        socket.create_connection((host, p), timeout=5).close()
        return {}
    return f


out = {"http.client": attempt(httpclient), "raw": attempt(raw), "urllib": attempt(url)}
out["nx"] = attempt(lambda: {"addrs": [a[4][0] for a in socket.getaddrinfo("not-listed.test", 80, proto=socket.IPPROTO_TCP)]})
out["addr"] = attempt(lambda: {"addrs": sorted({a[4][0] for a in socket.getaddrinfo(name, port, proto=socket.IPPROTO_TCP)})})
out["port81"] = attempt(connect(name, 81))
out["metadata"] = attempt(connect("169.254.169.254", 80))
out["literal"] = attempt(connect("127.0.0.1", port))
print(json.dumps(out))
