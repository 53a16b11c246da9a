# dns_flood.py N: send N DNS queries for distinct names not on the list to
# the stub as fast as possible, then count the answers that come back
# within a second of the last send. Print {"sent": N, "answered": K}.
import json, socket, struct, sys, time

n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
s.connect(("127.0.0.53", 53))
s.setblocking(False)
answered = 0


def drain():
    global answered
    while True:
        try:
            s.recv(512)
            answered += 1
        except BlockingIOError:
            return


for i in range(n):
    label = f"n{i}".encode()
    q = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + bytes([len(label)]) + label + b"\x04test\x00" + struct.pack(">HH", 1, 1)
    try:
        s.send(q)
    except BlockingIOError:
        pass
    drain()
end = time.time() + 1
while time.time() < end:
    drain()
    time.sleep(0.01)
print(json.dumps({"sent": n, "answered": answered}))
