#!/usr/bin/env bash
# make bench: sbx against bare python3 and bubblewrap, side by side in one
# hyperfine run, printed as medians and ratios. A report, never a test.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine bwrap; do
	command -v $tool >/dev/null || { echo "bench: $tool missing: apt-get install -y hyperfine bubblewrap" >&2; exit 1; }
done
runs=${BENCH_RUNS:-100}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
py='/usr/bin/python3 -S -c pass'
bwrap="bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --clearenv --setenv PATH /usr/bin:/bin --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dev /dev --tmpfs /tmp --tmpfs /work --chdir /work $py"
# sbx as it runs by default (root here: cgroup limits, the denylist
# filter), and the same run as an unprivileged user (uid 65534: no
# cgroup, rlimits instead), when sbx runs as root.
extra=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	extra=(-n sbx-rootless "setpriv --reuid=65534 --regid=65534 --clear-groups ./sbx exec -- $py")
fi
hyperfine -N --warmup 10 --runs "$runs" --export-json "$out/r.json" \
	-n python3 "$py" -n bwrap "$bwrap" -n sbx "./sbx exec -- $py" "${extra[@]}" >/dev/null
python3 - "$out/r.json" <<'PY'
import json, sys
r = {b["command"]: b for b in json.load(open(sys.argv[1]))["results"]}
med = {k: v["median"] * 1000 for k, v in r.items()}
base = med["python3"]
print(f"{'runner':<10}{'median ms':>10}{'added ms':>10}{'vs python3':>12}{'vs bwrap':>10}")
for k in [k for k in ("python3", "bwrap", "sbx", "sbx-rootless") if k in med]:
    print(f"{k:<10}{med[k]:>10.2f}{med[k]-base:>10.2f}{med[k]/base:>11.2f}x{med[k]/med['bwrap']:>9.2f}x")
print(f"\nsbx adds {med['sbx']-base:.2f} ms, bwrap adds {med['bwrap']-base:.2f} ms "
      f"(sbx/bwrap overhead ratio {(med['sbx']-base)/max(med['bwrap']-base,1e-9):.2f}); "
      "see `sbx exec --debug-timings` for where sbx's time goes")
PY
