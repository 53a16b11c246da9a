# hardlinks.py MIB LINKS: one MIB MiB file in the workspace and LINKS hard
# links to it. Prints {"logical_bytes": ...}: what a consumer reading every
# name would read.
import json, os, sys

mib, links = int(sys.argv[1]), int(sys.argv[2])
with open("big", "wb") as f:
    f.write(os.urandom(1 << 20) * mib)
for i in range(links):
    os.link("big", "link%04d" % i)
print(json.dumps({"logical_bytes": (links + 1) * (mib << 20)}))
