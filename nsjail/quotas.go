package nsjail

// userNSQuota is one per-user-namespace limit of /proc/sys/user that the
// init sets in the sandbox's own user namespace, where its root holds
// CAP_SYS_RESOURCE (user_namespaces(7), "/proc/sys/user"). The kernel
// charges each of these counts to the namespace the caller is in and to
// every namespace above it, up to the host's, against the user who
// created each namespace (kernel/ucount.c, inc_ucount): a sandbox started
// by root draws on host root's own quota, one started by uid 65534 on
// that user's. Setting the limit in the sandbox's namespace bounds what
// one sandbox can take of it.
type userNSQuota struct {
	// name is the file under /proc/sys/user.
	name string
	// value is what the sandbox gets.
	value int64
	// optional: the file may be missing (an older kernel), and then the
	// kernel has no such quota for a payload to drain; why says so.
	optional bool
	// result is the key in the Result's limits; "" for none.
	result string
	why    string
}

// userNSQuotas are set in this order, after the mounts (the init creates
// no namespace after them). max_user_namespaces=0 comes first, on its own
// (forbidNestedUserNS).
var userNSQuotas = []userNSQuota{
	{name: "max_inotify_instances", value: 16, result: "inotify_instances",
		why: "inotify instances (Linux 4.9); 128 per host user by default, so 128 in one sandbox left none to the user who started sbx"},
	{name: "max_inotify_watches", value: 8192, result: "inotify_watches",
		why: "inotify watches (Linux 4.9), each pinning kernel memory"},
	{name: "max_fanotify_groups", value: 0, optional: true, result: "fanotify_groups",
		why: "fanotify groups (per namespace since Linux 5.13, when unprivileged fanotify came; before, fanotify needs CAP_SYS_ADMIN on the host); nothing a payload runs needs one"},
	{name: "max_fanotify_marks", value: 0, optional: true, result: "fanotify_marks",
		why: "fanotify marks (Linux 5.13, as groups)"},
	// A payload holds no capability, so it cannot create any of these
	// (CAP_SYS_ADMIN in the sandbox's namespace): 0 makes that a second
	// wall, as max_user_namespaces=0 is for user namespaces.
	{name: "max_mnt_namespaces", value: 0, why: "mount namespaces"},
	{name: "max_pid_namespaces", value: 0, why: "pid namespaces"},
	{name: "max_net_namespaces", value: 0, why: "network namespaces"},
	{name: "max_ipc_namespaces", value: 0, why: "IPC namespaces"},
	{name: "max_uts_namespaces", value: 0, why: "UTS namespaces"},
	{name: "max_cgroup_namespaces", value: 0, why: "cgroup namespaces"},
	{name: "max_time_namespaces", value: 0, optional: true, why: "time namespaces (Linux 5.6)"},
}
