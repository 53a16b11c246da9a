#!/bin/bash
# own-cgroup.sh CMD [ARGS...]: run CMD in a fresh cgroup of its own below
# the subtree delegated to this user ($VMTEST_CGROUP, from run-in-vm.sh -u),
# the way `systemd-run --user --scope -p Delegate=yes CMD` would: sbx then
# starts in a cgroup that holds nothing but itself, and nests its sandboxes
# below it. Used by `make vmtest` for the rootless cgroup v2 runs.
set -eu
: "${VMTEST_CGROUP:?run under run-in-vm.sh -u UID}"
runs=$VMTEST_CGROUP/runs
if [ ! -d "$runs" ]; then
	# Controllers for the delegated subtree's children (its own cgroup
	# holds no process: run-in-vm.sh puts the test in .../test).
	echo "+cpu +memory +pids" >"$VMTEST_CGROUP/cgroup.subtree_control" 2>/dev/null || true
	mkdir -p "$runs"
	echo "+cpu +memory +pids" >"$runs/cgroup.subtree_control"
fi
dir=$(mktemp -d "$runs/run-XXXXXX")
# The command alone in $dir: this shell stays where it is.
rc=0
( echo "$BASHPID" >"$dir/cgroup.procs"; exec "$@" ) || rc=$?
# What sbx leaves while it runs (its supervisor leaf) goes with the scope.
rmdir "$dir"/sbx-supervisor-* "$dir" 2>/dev/null || true
exit "$rc"
