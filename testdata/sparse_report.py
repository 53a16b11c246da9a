# sparse_report.py MARKER N: leave N sparse files of 128 MiB (the default
# per-file cap) in the workspace, say ready, and exit 0. Each is hashed
# after the payload is gone, holes and all, so the workspace report takes
# minutes: a report that only sbx's own limits can end.
import sys
for i in range(int(sys.argv[2])):
    with open("sparse%04d" % i, "wb") as f:
        f.truncate(128 << 20)
print("ready", flush=True)
