#!/bin/bash
# vm-delegate.sh CMD [ARGS...] - for run-in-vm.sh -u UID: make the test's own
# cgroup look like a systemd Delegate=yes unit's cgroup, i.e. give it the
# cpu, memory and pids controllers (systemd enables them in the unit's
# parent, the slice, which is what this write to the delegated directory
# $VMTEST_CGROUP does). The test binary then starts in a cgroup that has the
# controllers and holds its process, so sbx must move itself into a leaf
# before it can enable them for its sandboxes. Runs as the unprivileged
# user; it only writes the directory run-in-vm.sh delegated to that user.
set -eu
echo "+cpu +memory +pids" >"$VMTEST_CGROUP/cgroup.subtree_control"
exec "$@"
