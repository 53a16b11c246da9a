# proxyflood.py N SIZE: N requests to sbx's proxy, each with a SIZE-byte
# method token for a host the allowlist refuses (a.test), one connection
# each. Prints {"sent": bytes, "answered": n}.
# It stops after 8 s, well within the wall limit, should the proxy slow
# it down (a rate limit on refusals).
import json, socket, sys, time

n, size = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 8
req = b"A" * size + b" http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"
sent = answered = 0
for _ in range(n):
    if time.monotonic() > deadline:
        break
    try:
        with socket.create_connection(("127.0.0.1", 3128), timeout=2) as s:
            s.sendall(req)
            sent += len(req)
            if s.recv(64):
                answered += 1
    except OSError:
        pass
print(json.dumps({"sent": sent, "answered": answered}))
