#!/bin/bash
# vm-leftovers.sh TEST_BINARY - for run-in-vm.sh -u UID (after vm-delegate.sh):
# run TEST_BINARY alone in $VMTEST_CGROUP/test from a shell that waits in a
# sibling cgroup, list the sbx-* cgroups left once the test process has
# exited (only its own, empty sbx-supervisor-<pid> leaf is expected), then
# start a second run the way a later sbx starts (in a leaf of its own) and
# show that its CleanupStale removed the first run's leaf.
set -u
d=$VMTEST_CGROUP
mkdir -p "$d/checker" && echo $$ >"$d/checker/cgroup.procs"
sh -c 'echo $$ > "$0/test/cgroup.procs" && exec "$@"' "$d" "$1" -test.v >/tmp/out.txt 2>&1
echo "test rc=$? $(tail -1 /tmp/out.txt) $(grep -c '^--- PASS' /tmp/out.txt) passed, $(grep -c '^--- SKIP' /tmp/out.txt) skipped"
grep -E "^--- FAIL" /tmp/out.txt
echo "sbx-* left after the test process exited:"; find /sys/fs/cgroup -name 'sbx-*'
echo "processes left in $d/test: $(wc -l <"$d/test/cgroup.procs")"
echo "--- a second run (TestCleanupStale only), started in a leaf of its own:"
sh -c 'mkdir "$0/test/sbx-supervisor-$$" && echo $$ > "$0/test/sbx-supervisor-$$/cgroup.procs" && exec "$@"' \
	"$d" "$1" -test.run TestCleanupStale -test.v >/tmp/out2.txt 2>&1
echo "rc=$? $(tail -1 /tmp/out2.txt)"
echo "sbx-* left now:"; find /sys/fs/cgroup -name 'sbx-*'
