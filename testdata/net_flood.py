# net_flood.py KIND THREADS COUNT: flood the proxy (127.0.0.1:3128) from
# THREADS threads, COUNT connections each, with requests it must refuse,
# and print {"connected": N, "answered": M} (connections made, and how many
# got any answer before the close). Issue 11, findings 1 and 9.
#   method: a 65,400-byte method ("A" * 65400 + " http://a.test/ HTTP/1.1"),
#           which the proxy used to record whole
#   amp:    the same with "&", which JSON used to escape to six bytes each
#   header: a GET to not-listed.test with a 20 KiB header field
import json, socket, sys, threading

kind, threads, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
req = {
    "method": b"A" * 65400 + b" http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "amp": b"&" * 65400 + b" http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "header": b"GET http://not-listed.test/ HTTP/1.1\r\nHost: not-listed.test\r\nX-Pad: "
    + b"a" * (20 << 10) + b"\r\n\r\n",
}[kind]
lock = threading.Lock()
out = {"connected": 0, "answered": 0}


def flood():
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
        except OSError:
            continue
        with lock:
            out["connected"] += 1
        got = b""
        try:
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except OSError:
            pass
        s.close()
        if got:
            with lock:
                out["answered"] += 1


ts = [threading.Thread(target=flood) for _ in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(out))
