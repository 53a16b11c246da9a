#!/usr/bin/env python3
"""make bench, the server section: sbx serve's warm pool over HTTP against
cold `sbx exec` and bare python3, in one interleaved run (issue 14).

A report, never a test. One `sbx serve --pool standard=8,data=2` on
127.0.0.1 (a random port), as the user running the bench. Every round
runs each runner once in a rotated order, so load that comes and goes on
a shared machine lands on all of them alike; before each sample (warm,
cold or bare) the bench waits until every pool is full again, so a warm
sample is a claim of a ready sandbox and no sample shares the CPUs with
a refill (the pool's background work, not any request's). Rows:

  print(1)   wall of one run: an HTTP POST /v1/exec {"code": "print(1)"}
             from send to the parsed Result (the sandbox was built
             ahead); `sbx exec --profile standard -c 'print(1)'` from fork
             to reap; bare `python3 -c 'print(1)'`
  group-by   a pandas group-by (the snippet below) under `data`: warm
             (pandas preloaded) over HTTP, and cold `sbx exec --profile
             data`
  runs/s     print(1) at concurrency 2 and 8: clients posting back to
             back (warm: the pool refills within --max-concurrent 8 while
             they go; "hit" is the share of runs that found a sandbox
             ready) against as many `sbx exec` loops
  RSS        the server's VmRSS with 8 warm standard sandboxes (and 2
             data ones) ready, and what the sandboxes' processes take:
             their Pss (shared pages split among the sharers) in all and
             per sandbox

Environment: BENCH_SERVE_RUNS (print(1) rounds, 100), BENCH_SERVE_PANDAS
(group-by rounds, 15), BENCH_SERVE_TPUT (runs per throughput round, 60),
SBX (the binary, ./sbx).
"""
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

GROUPBY = """import pandas as pd
df = pd.DataFrame({"k": [i % 7 for i in range(10000)], "v": range(10000)})
print(df.groupby("k").v.sum().sum())
"""
POOLS = {"standard": 8, "data": 2}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Server:
    def __init__(self, sbx):
        args = [sbx, "serve", "--listen", "127.0.0.1:0", "--max-concurrent", "8", "--queue", "64",
                "--pool", ",".join(f"{k}={n}" for k, n in POOLS.items())]
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.p.stderr:
            m = re.match(r"sbx serve: listening on ([0-9.]+):(\d+);", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
        else:
            sys.exit(f"bench: sbx serve exited: {self.p.wait()}")
        threading.Thread(target=self.p.stderr.read, daemon=True).start()
        self.local = threading.local()

    def conn(self):
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        return c

    def call(self, method, path, body=None):
        c = self.conn()
        c.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        b = r.read()
        if r.status != 200:
            sys.exit(f"bench: {method} {path}: {r.status} {b[:300]!r}")
        return json.loads(b)

    def run(self, body):
        """(wall s, Result) of one POST /v1/exec."""
        t = time.perf_counter()
        res = self.call("POST", "/v1/exec", body)
        wall = time.perf_counter() - t
        if res["status"] != "ok":
            sys.exit(f"bench: {body}: {res['status']}: {res['message']} {res['stderr'][-300:]}")
        return wall, res

    def pools(self):
        return {p["name"]: p["pool"] for p in self.call("GET", "/v1/profiles")["profiles"] if p.get("pool")}

    def wait_full(self, timeout=300):
        t = time.monotonic() + timeout
        while time.monotonic() < t:
            ps = self.pools()
            if all(ps[k]["idle"] >= n for k, n in POOLS.items()):
                return
            time.sleep(0.02)
        sys.exit(f"bench: the pools did not fill in {timeout}s: {self.pools()}")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        if self.p.wait(timeout=120) != 0:
            sys.exit(f"bench: sbx serve exited {self.p.returncode} after SIGTERM")


def once(argv):
    t = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:6])}...: exit {p.returncode}: {p.stderr[-300:]!r}")
    return time.perf_counter() - t


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        try:
            for t in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{t}/children") as f:
                    kids = [int(c) for c in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(l.split()[1]) for l in f if l.startswith("Pss:"))
    except OSError:
        return 0


def throughput(fn, conc, runs):
    n = [runs // conc + (1 if k < runs % conc else 0) for k in range(conc)]
    out = []

    def work(k):
        for _ in range(n[k]):
            out.append(fn())
    t = time.perf_counter()
    ws = [threading.Thread(target=work, args=(k,)) for k in range(conc)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    return runs / (time.perf_counter() - t), out


def main():
    sbx = os.path.abspath(os.environ.get("SBX", "./sbx"))
    rounds = int(os.environ.get("BENCH_SERVE_RUNS", "100"))
    prounds = int(os.environ.get("BENCH_SERVE_PANDAS", "15"))
    truns = int(os.environ.get("BENCH_SERVE_TPUT", "60"))
    load0 = os.getloadavg()
    srv = Server(sbx)
    try:
        srv.wait_full()
        print1 = {"code": "print(1)"}
        cold1 = [sbx, "exec", "--profile", "standard", "-c", "print(1)"]
        bare1 = ["/usr/bin/python3", "-c", "print(1)"]
        for _ in range(3):  # warm-up: page cache, the first cgroups
            once(cold1), once(bare1)
            srv.wait_full()
            srv.run(print1)
        runners = {
            "warm": lambda: srv.run(print1),
            "cold": lambda: (once(cold1), None),
            "bare": lambda: (once(bare1), None),
        }
        wall = {k: [] for k in runners}
        misses = 0
        for i in range(rounds):
            names = list(runners)
            for j in range(len(names)):
                n = names[(i + j) % len(names)]
                srv.wait_full()
                w, res = runners[n]()
                wall[n].append(w * 1000)
                if res is not None and not res.get("pooled"):
                    misses += 1

        gb = {"code": GROUPBY, "profile": "data"}
        coldgb = [sbx, "exec", "--profile", "data", "-c", GROUPBY]
        pw, pc, pmiss = [], [], 0
        for i in range(prounds):
            for j in range(2):
                srv.wait_full()
                if (i + j) % 2 == 0:
                    w, res = srv.run(gb)
                    pw.append(w * 1000)
                    pmiss += not res.get("pooled")
                else:
                    pc.append(once(coldgb) * 1000)

        tput = {}
        for conc in (2, 8):
            srv.wait_full()
            rate, out = throughput(lambda: srv.run(print1)[1], conc, truns)
            hits = sum(1 for r in out if r.get("pooled")) / len(out)
            crate, _ = throughput(lambda: once(cold1), conc, truns)
            tput[conc] = (rate, hits, crate)

        srv.wait_full()
        time.sleep(1)
        rss = status_kb(srv.p.pid, "VmRSS")
        kids = descendants(srv.p.pid)
        pss = sum(pss_kb(k) for k in kids)
        nsb = sum(POOLS.values())
    finally:
        srv.stop()
    load1 = os.getloadavg()

    m = {k: statistics.median(v) for k, v in wall.items()}
    print("\n### sbx serve: the warm pool over HTTP (issue 14)\n")
    print("| payload | warm over HTTP: p50 / p99 | cold `sbx exec`: p50 / p99 | bare `python3`: p50 | cold / warm | warm / bare |")
    print("|---|---|---|---|---|---|")
    print(f"| `print(1)` | {m['warm']:.1f} / {pct(wall['warm'], 99):.1f} ms | {m['cold']:.1f} / {pct(wall['cold'], 99):.1f} ms | "
          f"{m['bare']:.1f} ms | {m['cold'] / m['warm']:.1f}× | {m['warm'] / m['bare']:.2f}× |")
    print(f"| pandas group-by, `data` | {statistics.median(pw):.1f} / {pct(pw, 99):.1f} ms | "
          f"{statistics.median(pc):.1f} / {pct(pc, 99):.1f} ms | — | {statistics.median(pc) / statistics.median(pw):.1f}× | — |")
    print("\n| concurrency | warm over HTTP: runs/s (hits) | cold `sbx exec`: runs/s | warm / cold |")
    print("|---|---|---|---|")
    for conc, (rate, hits, crate) in tput.items():
        print(f"| {conc} | {rate:.1f} ({hits:.0%}) | {crate:.1f} | {rate / crate:.2f}× |")
    print(f"\nServer RSS with {POOLS['standard']} warm standard and {POOLS['data']} data sandboxes ready: "
          f"{rss / 1024:.1f} MB (VmRSS of sbx serve); the sandboxes' {len(kids)} processes: "
          f"{pss / 1024:.1f} MB Pss in all, {pss / 1024 / nsb:.1f} MB a sandbox.")
    print(f"\n{rounds} interleaved rounds of print(1) ({misses} warm samples missed the pool), {prounds} of the "
          f"group-by ({pmiss} missed); throughput: {truns} runs at each concurrency, --max-concurrent 8; "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after; {os.cpu_count()} CPUs; uid {os.geteuid()}.")


if __name__ == "__main__":
    main()
