# The payload's own credentials, from /proc/self/status. Prints the Cap*,
# NoNewPrivs and Seccomp lines as {"CapEff": "0000000000000000", ...}.
import json

keys = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
out = {}
with open("/proc/self/status") as f:
    for line in f:
        k, _, v = line.partition(":")
        if k in keys:
            out[k] = v.strip()
print(json.dumps(out))
