package rootfs

import "path"

// ProcMask is one /proc path that the sandbox must not read or write as
// the kernel offers it. The sandbox's procfs is its own mount (of its pid
// namespace), but many of its files are not namespaced: they show the
// host's memory map, kernel, timers and interrupts, whatever namespace
// reads them.
type ProcMask struct {
	// Path is relative to /proc.
	Path string
	// Kind is KindMaskFile, KindMaskDir or KindRebindRO.
	Kind Kind
	// Why is the reason, for the docs and for reviewers.
	Why string
}

// procMasks follows the defaults of the container runtimes (moby's
// oci/defaults.go MaskedPaths and ReadonlyPaths, which runc applies as
// maskPath and readonlyPath), plus the host-wide files they leave out
// that this issue found readable (iomem, ioports, config.gz, kallsyms,
// interrupts, ...). A path the running kernel does not have is skipped.
//
// Masking costs one mount(2) per path present (two for a read-only
// rebind), done while the supervisor attaches the cgroup, so it adds
// nothing to the start-up on the critical path.
var procMasks = []ProcMask{
	{"kcore", KindMaskFile, "the host's physical memory as an ELF core (0400 to host root, but the size alone reveals the memory map)"},
	{"kallsyms", KindMaskFile, "kernel symbols: which modules and functions the host kernel has, addresses where kptr_restrict allows"},
	{"keys", KindMaskFile, "the keyrings visible to the caller (keyrings are not namespaced)"},
	{"key-users", KindMaskFile, "per-uid key quotas of the whole host"},
	{"timer_list", KindMaskFile, "every pending kernel timer of the host, with the tasks that armed them"},
	{"timer_stats", KindMaskFile, "timer usage of host tasks (before Linux 4.11)"},
	{"sched_debug", KindMaskFile, "the scheduler's run queues: every host task's name and pid (before Linux 5.13 moved it to debugfs)"},
	{"latency_stats", KindMaskFile, "latency records of host tasks (CONFIG_LATENCYTOP)"},
	{"iomem", KindMaskFile, "the host's physical memory map"},
	{"ioports", KindMaskFile, "the host's I/O port map and drivers"},
	{"config.gz", KindMaskFile, "the host kernel's build configuration: which attack surface it has"},
	{"interrupts", KindMaskFile, "per-CPU interrupt counts of the whole host: a side channel on keystrokes and host activity (moby masks it since v28)"},
	{"softirqs", KindMaskFile, "per-CPU softirq counts of the whole host: the same side channel as interrupts"},
	{"modules", KindMaskFile, "the host kernel's loaded modules: which attack surface it has loaded"},
	{"kmsg", KindMaskFile, "the kernel log (also refused by seccomp's syslog rule)"},
	{"acpi", KindMaskDir, "ACPI tables and device state of the host"},
	{"asound", KindMaskDir, "the host's sound cards"},
	{"scsi", KindMaskDir, "the host's SCSI devices, and a write interface to them"},
	{"bus", KindRebindRO, "PCI and USB device state: read-only, as the runtimes do"},
	{"fs", KindRebindRO, "filesystem tunables: read-only"},
	{"irq", KindRebindRO, "interrupt affinity: read-only"},
	{"sys", KindRebindRO, "sysctls: the sandbox's own namespaces' values stay readable; none may be written once the init set its own"},
	{"sysrq-trigger", KindRebindRO, "magic SysRq (reboot, crash, kill all): read-only, so a write fails with EROFS whatever the file's owner"},
}

// ProcMasks is the list of /proc masks as mount steps, in table order.
// The init applies them after its own /proc/sys writes (as runc applies
// readonlyPaths and maskPaths after the sysctls), since /proc/sys becomes
// read-only.
func ProcMasks() []Mount {
	out := make([]Mount, len(procMasks))
	for i, m := range procMasks {
		out[i] = Mount{Kind: m.Kind, Dst: path.Join("/proc", m.Path)}
	}
	return out
}

// ProcMaskTable returns a copy of the table, for the docs.
func ProcMaskTable() []ProcMask { return append([]ProcMask(nil), procMasks...) }
