#!/usr/bin/env python3
"""make bench: sbx against bare python3 and bubblewrap, in one interleaved run.

A report, never a test. Every round runs each runner once, in a rotated
order (A B C, B C A, ...), so load that comes and goes on a shared machine
lands on all of them alike; the table gives medians. SBX_BEFORE=PATH adds
the same sbx runners for a second binary (a "before" build), interleaved
with the first: an A/B comparison in one run.

Columns:
  wall      median wall time of one run, from fork to reap
  vs bwrap  wall median over bubblewrap's
  CPU       median user+system CPU of the run's whole process tree
            (wait4's rusage: the runner and every descendant it reaped;
            "—" for bwrap, whose pid 1 the measured process does not reap)
  own CPU   CPU minus bare python3's median CPU: the runner's own cost,
            assuming the payload costs inside what it costs bare
  faults    median page faults of the run's whole reaped tree (wait4's
            ru_minflt + ru_majflt), and in brackets the runner's own (minus
            bare python3's). Each is a page the kernel had to map: on a VM
            whose page tables the hypervisor shadows that is the run's
            largest cost (~8-12 µs a page on the dev VM), and unlike time
            it hardly moves with the load, so it shows a step's effect
            where wall and CPU drown in noise. "—" where CPU is.
  runs/s    throughput with 2 workers, each starting runs back to back
  RSS       VmRSS of the runner's first process (sbx: the supervisor) and
            of its child (sbx: the init; bwrap: its pid 1) while the
            payload sleeps, i.e. while the init waits in wait4, with its
            threads and its private part, its anonymous pages (what one
            more sandbox costs: the rest is the binary's pages in the
            page cache, shared)
"""
import os
import statistics
import subprocess
import sys
import threading
import time

PY = ["/usr/bin/python3", "-S", "-c"]
PASS = "pass"
SLEEP = "import time; time.sleep(1.5)"
BWRAP = ("bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --clearenv "
         "--setenv PATH /usr/bin:/bin --ro-bind /usr /usr --symlink usr/bin /bin "
         "--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin "
         "--proc /proc --dev /dev --tmpfs /tmp --tmpfs /work --chdir /work").split()
ROOTLESS = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def runners():
    """name -> argv prefix; the payload's code is appended."""
    r = {"python3": [], "bwrap": BWRAP + ["--"]}
    bins = [("sbx", os.environ.get("SBX", "./sbx"))]
    if os.environ.get("SBX_BEFORE"):
        bins.append(("before", os.environ["SBX_BEFORE"]))
    root = os.geteuid() == 0
    for tag, b in bins:
        b = os.path.abspath(b)
        if root:
            r[f"{tag} strict, root"] = [b, "exec", "--profile", "strict", "--"]
            r[f"{tag} standard, root"] = [b, "exec", "--profile", "standard", "--"]
            r[f"{tag} strict, 65534"] = ROOTLESS + [b, "exec", "--profile", "strict", "--"]
        else:
            r[f"{tag} strict"] = [b, "exec", "--profile", "strict", "--"]
    return {n: a + PY for n, a in r.items()}


def once(argv):
    """Runs argv to its end: (wall s, CPU s and page faults of the whole
    reaped tree)."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)}: exit status {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_minflt + ru.ru_majflt


def vmrss(pid):
    """(VmRSS kB, threads, private kB) of pid, or Nones once it is gone.

    Private is Anonymous of smaps_rollup: the pages that are this
    process's own (heap, stacks, written data). The rest of the RSS is
    the binary's pages in the page cache (for sbx-init, its memfd's),
    which every process that maps them shares. Not Private_Clean +
    Private_Dirty, as before issue 13's init binary: those count a file's
    pages as private whenever one process alone maps them, which is now
    the case of the sbx binary (the supervisor alone) and of the memfd
    under `sbx exec` (one init), though a second sandbox adds none."""
    rss = thr = priv = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    thr = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            priv = sum(int(l.split()[1]) for l in f if l.startswith("Anonymous:"))
    except OSError:
        pass
    return rss, thr, priv


def children(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def rss(argv):
    """The RSS of the runner and of its child while the payload sleeps."""
    p = subprocess.Popen(argv + [SLEEP], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.8)
    top = vmrss(p.pid)
    kids = children(p.pid)
    child = vmrss(kids[0]) if kids else (None, None, None)
    p.wait()
    return top, child


def throughput(argv, runs):
    """Runs per second with two workers starting runs back to back."""
    n = [runs // 2, runs - runs // 2]

    def work(k):
        for _ in range(n[k]):
            once(argv)
    t = time.perf_counter()
    ws = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    return runs / (time.perf_counter() - t)


def as_installed(path):
    """Drops path's pages from the page cache, so that the runs read it
    back the way an installed binary is read (readahead on the first
    faults), not as the linker left it. On Linux 6.18's ext4 a file written
    in large chunks (the linker's output, dd bs=4M) sits in the page cache
    in large folios, and every run of it took ~85 fewer page faults, 1.6-2.4
    ms less wall and ~2 ms less CPU than the same bytes written by cp or
    read back from disk (docs/DESIGN.md, eighth pass): a freshly built
    ./sbx measured faster than sbx as users run it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # DONTNEED leaves dirty pages alone
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    for b in [os.environ.get("SBX", "./sbx"), os.environ.get("SBX_BEFORE")]:
        if b:
            as_installed(b)
    pairs = int(os.environ.get("BENCH_RUNS", "30"))
    tput_runs = int(os.environ.get("BENCH_TPUT_RUNS", "40"))
    tput_rounds = int(os.environ.get("BENCH_TPUT_ROUNDS", "3"))
    rs = runners()
    names = list(rs)
    for n in names:  # warm-up: page cache, the first cgroup, bwrap's setuid check
        for _ in range(3):
            once(rs[n] + [PASS])
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    faults = {n: [] for n in names}
    load0 = os.getloadavg()
    for i in range(pairs):
        for j in range(len(names)):
            n = names[(i + j) % len(names)]
            w, c, f = once(rs[n] + [PASS])
            wall[n].append(w * 1000)
            cpu[n].append(c * 1000)
            faults[n].append(f)
    tput = {n: [] for n in names}
    for i in range(tput_rounds):
        for j in range(len(names)):
            n = names[(i + j) % len(names)]
            tput[n].append(throughput(rs[n] + [PASS], tput_runs))
    mem = {n: rss(rs[n]) for n in names if n != "python3"}
    load1 = os.getloadavg()

    med = {n: statistics.median(v) for n, v in wall.items()}
    cmed = {n: statistics.median(v) for n, v in cpu.items()}
    fmed = {n: statistics.median(v) for n, v in faults.items()}
    bw, pycpu, pyflt = med["bwrap"], cmed["python3"], fmed["python3"]

    def kb(r):
        if r[0] is None:
            return "—"
        priv = "" if r[2] is None else f", {r[2] / 1024:.1f} private"
        return f"{r[0] / 1024:.1f} MB ({r[1]} thr{priv})"
    print(f"| runner | wall | vs bwrap | CPU per run | own CPU | faults (own) | runs/s at 2 workers | RSS: supervisor / init |")
    print("|---|---|---|---|---|---|---|---|")
    for n in names:
        # bwrap's pid 1 is not reaped by the process bwrap started
        # (wait4 sees ~2 ms, less than the payload): not measurable here.
        seen = n == "python3" or cmed[n] >= pycpu
        c = f"{cmed[n]:.1f} ms" if seen else "—"
        own = "—" if n == "python3" or not seen else f"{cmed[n] - pycpu:.1f} ms"
        flt = "—" if not seen else f"{fmed[n]:.0f}" if n == "python3" else f"{fmed[n]:.0f} ({fmed[n] - pyflt:+.0f})"
        m = "—" if n == "python3" else f"{kb(mem[n][0])} / {kb(mem[n][1])}"
        print(f"| {n} | {med[n]:.1f} ms | {med[n] / bw:.2f}× | {c} | {own} | {flt} | "
              f"{statistics.median(tput[n]):.0f} | {m} |")
    print(f"\n{pairs} interleaved rounds (medians); throughput: median of {tput_rounds} rounds of "
          f"{tput_runs} runs; load average {load0[0]:.2f} before, {load1[0]:.2f} after; "
          f"{os.cpu_count()} CPUs. `sbx exec --debug-timings` shows where sbx's time goes.")


if __name__ == "__main__":
    main()
