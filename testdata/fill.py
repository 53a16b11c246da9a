# fill.py DIR bytes|inodes: write into DIR until the tmpfs says no; print
# what stopped it and how far it got.
import errno, json, os, sys

d, what = sys.argv[1], sys.argv[2]
written, err = 0, None
try:
    if what == "bytes":
        with open(os.path.join(d, "big"), "wb") as f:
            chunk = b"x" * (1 << 20)
            for _ in range(4096):
                f.write(chunk)
                f.flush()
                written += len(chunk)
    else:
        for i in range(1 << 20):
            open(os.path.join(d, "f%d" % i), "w").close()
            written += 1
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"error": err, "written": written}))
