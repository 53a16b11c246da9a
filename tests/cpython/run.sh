#!/usr/bin/env bash
# CPython's own regression tests inside `sbx exec --profile strict`, with
# the limits raised (below) but every layer on: the modules of
# modules.txt, without the test cases of exclude.txt (docs/compat.md).
#
#   tests/cpython/run.sh                 the full set, as root and as uid
#                                        65534 when run as root (~2-3 min each)
#   tests/cpython/run.sh --set ci        the CI subset (TestCPythonRegressionUnderStrict)
#   tests/cpython/run.sh --as 65534      one identity only
#   tests/cpython/run.sh --bare          the same modules without sbx, as
#                                        uid 65534: how the set was chosen
#   tests/cpython/run.sh --sbx PATH -j N a given binary; N regrtest workers
#
# Needs Debian's libpython3.11-testsuite (apt-get install
# libpython3.11-testsuite) and, without --sbx, a built ./sbx (make sbx).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sbx=$repo/sbx
set=full
jobs=2
bare=0
ids=()
while [ $# -gt 0 ]; do
	case $1 in
	--set) set=$2; shift 2 ;;
	--sbx) sbx=$2; shift 2 ;;
	--as) ids+=("$2"); shift 2 ;;
	-j) jobs=$2; shift 2 ;;
	--bare) bare=1; shift ;;
	*) echo "usage: $0 [--set full|ci] [--sbx PATH] [--as UID]... [-j N] [--bare]" >&2; exit 2 ;;
	esac
done
python=/usr/bin/python3
if ! "$python" -c 'import test.libregrtest, test.test_pty' 2>/dev/null; then
	echo "cpython: CPython's test package is missing: apt-get install libpython3.11-testsuite" >&2
	exit 2
fi

# The modules: every plain line for the full set, the ci ones (and the
# ci-only parts of test_asyncio) for the CI subset.
modules=()
while read -r name mark _; do
	case $name in '' | '#'*) continue ;; esac
	case $set:$mark in
	full:ci-only) ;;
	full:*) modules+=("$name") ;;
	ci:ci | ci:ci-only) modules+=("$name") ;;
	ci:*) ;;
	*) echo "cpython: unknown set $set (full, ci)" >&2; exit 2 ;;
	esac
done <"$here/modules.txt"
ignores=()
while read -r pattern _; do
	case $pattern in '' | '#'*) continue ;; esac
	ignores+=(--ignore "$pattern")
done <"$here/exclude.txt"

# Raised limits: strict's own (256M, 5s of CPU, 10s, 64 pids, 64M files)
# fit a payload, not a test suite. Each one stays enforced.
#   --cpu-time: test_resource's test_setrusage_refcount lowers RLIMIT_CPU
#     to 1,000,000 s, which needs a hard limit at least that high; the
#     wall time bounds the run anyway.
#   --fsize, --workspace-size, --tmp-size: test_zlib, test_mmap and
#     test_gzip write files of hundreds of MB; regrtest works in /tmp.
#   --pids: regrtest's workers, test_threading, test_subprocess.
limits=(--timeout 900s --cpu-time 1000000s --memory 3G --pids 1024 --nofile 4096 --fsize 2G
	--workspace-size 1G --workspace-inodes 100000 --tmp-size 2G --tmp-inodes 100000)
regrtest=("$python" -m test -j "$jobs" --timeout 600 "${ignores[@]}" "${modules[@]}")

if [ ${#ids[@]} -eq 0 ]; then
	ids=("$(id -u)")
	[ "$(id -u)" = 0 ] && ids+=(65534)
fi
as() {
	local uid=$1
	shift
	if [ "$uid" = "$(id -u)" ]; then
		"$@"
	else
		setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
	fi
}

passed=0
failed=0
for uid in "${ids[@]}"; do
	start=$(date +%s)
	if [ $bare = 1 ]; then
		dir=$(mktemp -d)
		chown "$uid" "$dir" 2>/dev/null || true
		echo "cpython: ${#modules[@]} modules bare as uid $uid in $dir"
		rc=0
		(cd "$dir" && as "$uid" env -i PATH=/usr/bin:/bin HOME="$dir" TMPDIR="$dir" LANG=C.UTF-8 "${regrtest[@]}") || rc=$?
		rm -rf "$dir"
	else
		echo "cpython: ${#modules[@]} modules under sbx --profile strict, sbx run as uid $uid"
		rc=0
		as "$uid" "$sbx" exec --profile strict "${limits[@]}" -- "${regrtest[@]}" || rc=$?
	fi
	echo "cpython: as uid $uid: exit $rc after $(($(date +%s) - start)) s"
	if [ $rc = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "cpython: $passed passed, $failed failed"
[ $failed = 0 ]
