#!/usr/bin/env bash
# make bench: sbx (strict and standard as root, strict as uid 65534)
# against bare python3 and bubblewrap, interleaved round by round, printed
# as the table of issue 13 (bench/bench.py says what each column is); then
# the server section of issue 14: sbx serve's warm pool over HTTP against
# cold sbx exec and bare python3 (bench/serve.py). BENCH_SERVE=0 skips it,
# BENCH_EXEC=0 the first.
# SBX_BEFORE=path/to/old/sbx adds an older build, interleaved too: an A/B
# comparison. A report, never a test; CI does not run it.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in bwrap python3; do
	command -v $tool >/dev/null || { echo "bench: $tool missing: apt-get install -y bubblewrap python3" >&2; exit 1; }
done
if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null || { echo "bench: setpriv missing (util-linux), for the run as uid 65534" >&2; exit 1; }
fi
if [ "${BENCH_EXEC:-1}" != 0 ]; then
	python3 bench/bench.py
fi
if [ "${BENCH_SERVE:-1}" != 0 ]; then
	python3 bench/serve.py
fi
