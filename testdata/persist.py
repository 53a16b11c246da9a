# persist.py write|check: leave files behind, or look for them.
import json, os, sys
paths = ["/workspace/left-behind", "/tmp/left-behind", "/dev/shm/left-behind"]
if sys.argv[1] == "write":
    for p in paths:
        open(p, "w").write("x")
print(json.dumps({p: os.path.exists(p) for p in paths}))
