// Package doctor probes what sbx can enforce on this host, from where it
// runs, and says how to fix what is missing: unprivileged user
// namespaces, the cgroup mode and usable controllers, seccomp and user
// notification, CLONE_INTO_CGROUP, pidfd, Landlock, the rootfs's Python,
// and a real trial sandbox.
package doctor

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/kernel"
)

// Status of one check.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // sbx works, with a weaker or slower layer
	Fail Status = "fail" // the default profile cannot run
	Info Status = "info"
)

// Check is one probe's finding.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is everything doctor found.
type Report struct {
	Kernel string  `json:"kernel"`
	UID    int     `json:"uid"`
	Checks []Check `json:"checks"`
	// OK is true when everything the default profile needs is there.
	OK bool `json:"ok"`
}

// Probe is one named check.
type Probe struct {
	Name string
	Run  func() Check
}

// Run runs the probes in order.
func Run(probes []Probe) *Report {
	r := &Report{UID: os.Getuid(), OK: true}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	for _, p := range probes {
		c := p.Run()
		c.Name = p.Name
		if c.Status == Fail {
			r.OK = false
		}
		r.Checks = append(r.Checks, c)
	}
	return r
}

// Find returns the check named name.
func (r *Report) Find(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

func readSysctl(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// UserNSSysctls reads the knobs that forbid unprivileged user namespaces.
func UserNSSysctls() Check {
	var problems, fixes, seen []string
	if v, ok := readSysctl("/proc/sys/kernel/unprivileged_userns_clone"); ok {
		seen = append(seen, "kernel.unprivileged_userns_clone="+v)
		if v == "0" {
			problems = append(problems, "kernel.unprivileged_userns_clone=0")
			fixes = append(fixes, "sysctl -w kernel.unprivileged_userns_clone=1")
		}
	}
	if v, ok := readSysctl("/proc/sys/user/max_user_namespaces"); ok {
		seen = append(seen, "user.max_user_namespaces="+v)
		if v == "0" {
			problems = append(problems, "user.max_user_namespaces=0")
			fixes = append(fixes, "sysctl -w user.max_user_namespaces=15000")
		}
	}
	if v, ok := readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok {
		seen = append(seen, "kernel.apparmor_restrict_unprivileged_userns="+v)
		if v == "1" {
			problems = append(problems, "AppArmor restricts unprivileged user namespaces")
			fixes = append(fixes, "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or give sbx an AppArmor profile with 'userns,')")
		}
	}
	if len(problems) > 0 {
		st := Fail
		if os.Getuid() == 0 && len(problems) == 1 && strings.HasPrefix(problems[0], "kernel.unprivileged") {
			st = Warn // root is not bound by that knob
		}
		return Check{Status: st, Detail: strings.Join(problems, "; "), Fix: strings.Join(fixes, "; ")}
	}
	if len(seen) == 0 {
		seen = []string{"no restricting sysctl on this kernel"}
	}
	return Check{Status: OK, Detail: strings.Join(seen, ", ")}
}

// Pidfd checks pidfd_open(2) (Linux 5.3), which lets sbx signal and wait
// for its init without pid reuse races.
func Pidfd() Check {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return Check{Status: Warn, Detail: fmt.Sprintf("pidfd_open: %v", err), Fix: "a kernel of 5.3 or later"}
	}
	unix.Close(fd)
	return Check{Status: OK, Detail: "pidfd_open works"}
}

// Landlock checks the Landlock ABI that the init's ruleset gets here
// (landlock(7); nsjail.LandlockABI): with ABI 2 or later (Linux 5.19) the
// payload may write only where the mount plan makes it writable, whatever
// a mount would allow, and with ABI 6 (Linux 6.12) its signals and abstract
// unix sockets stay inside the sandbox. sbx runs without it, one layer
// thinner; --require landlock refuses such a host.
func Landlock(abi int) Check {
	fix := "a kernel of 5.19 or later built with CONFIG_SECURITY_LANDLOCK=y, with landlock in CONFIG_LSM or the lsm= boot parameter"
	switch {
	case abi <= 0:
		return Check{Status: Warn, Detail: "not available: runs have no Landlock layer (--require landlock fails)", Fix: fix}
	case abi == 1:
		return Check{Status: Warn, Detail: "ABI 1 is not used: it cannot allow renames between directories (--require landlock fails)", Fix: fix}
	case abi < 6:
		return Check{Status: OK, Detail: fmt.Sprintf("ABI %d: writes confined to the workspace, /tmp and /dev/shm; no signal or abstract socket scoping (ABI 6, Linux 6.12)", abi)}
	}
	return Check{Status: OK, Detail: fmt.Sprintf("ABI %d: writes confined to the workspace, /tmp and /dev/shm; signals and abstract unix sockets scoped", abi)}
}

// SeccompUserNotif checks that the kernel can report filtered syscalls to
// a listener (SECCOMP_RET_USER_NOTIF, Linux 5.0), which is how sbx names
// every denied syscall in the Result.
func SeccompUserNotif() Check {
	v, ok := readSysctl("/proc/sys/kernel/seccomp/actions_avail")
	if !ok {
		return Check{Status: Fail, Detail: "no /proc/sys/kernel/seccomp/actions_avail: seccomp filters are not available", Fix: "a kernel built with CONFIG_SECCOMP_FILTER"}
	}
	if !strings.Contains(" "+v+" ", " user_notif ") {
		return Check{Status: Warn, Detail: "seccomp without user notification (" + v + "): denials are refused but cannot be reported", Fix: "a kernel of 5.0 or later"}
	}
	return Check{Status: OK, Detail: "actions: " + v}
}

// Unified tells whether the host's /sys/fs/cgroup is cgroup v2 alone
// (statfs(2) f_type CGROUP2_SUPER_MAGIC), as opposed to v1 or hybrid,
// where the fixes differ: systemd delegates cgroups to users on v2 only
// (systemd.resource-control(5), Delegate=).
func Unified() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// Cgroup reports the mode sbx can use from where it runs and the
// controllers it can use there. unified says the host is cgroup v2 only
// (Unified): each fix is one that works on the host's hierarchy.
func Cgroup(probe func() (mode string, controllers []string, err error), unified bool) Check {
	mode, ctrls, err := probe()
	c := Check{Detail: fmt.Sprintf("mode %s, controllers %s", mode, strings.Join(ctrls, " "))}
	if len(ctrls) == 0 {
		c.Detail = "mode " + mode + ", no usable controller"
	}
	need := []string{"memory", "pids", "cpu"}
	var missing []string
	for _, n := range need {
		found := false
		for _, have := range ctrls {
			found = found || have == n
		}
		if !found {
			missing = append(missing, n)
		}
	}
	switch {
	case err != nil || mode == "none":
		c.Status = Warn
		c.Detail = fmt.Sprintf("%v: memory and pids fall back to per-process rlimits, the CPU time total to sbx's own poll (a task clock and /proc), the CPU share is not enforced", err)
		c.Fix = "run sbx as root, or in a cgroup delegated to you: systemd-run --user --scope -p Delegate=yes sbx ... (cgroup v2), or a systemd unit with Delegate=yes"
		if !unified {
			c.Fix = "run sbx as root; this host has cgroup v1 controllers, which systemd does not delegate to users: as root, give sbx's user a cgroup of its own in each of the memory, pids, cpu and cpuacct hierarchies (mkdir /sys/fs/cgroup/CTRL/sbx-USER; chown USER it and its cgroup.procs) and start sbx inside them, or boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2 delegation"
		}
	case len(missing) > 0:
		c.Status = Warn
		c.Detail += "; missing " + strings.Join(missing, ", ") + ": those limits fall back to rlimits"
		c.Fix = "delegate the missing controllers to sbx's cgroup (systemd: Delegate=yes; or echo +memory +pids +cpu > PARENT/cgroup.subtree_control)"
		if !unified {
			c.Fix = "mount the cgroup v1 hierarchies of the missing controllers (/sys/fs/cgroup/CTRL), with sbx's cgroup in each writable by its user"
		}
	default:
		c.Status = OK
	}
	return c
}

// CloneIntoCgroup says whether the init can be born in its cgroup
// (clone3 CLONE_INTO_CGROUP: cgroup v2 and Linux 5.7; on cgroup v1 the
// thread that clones it moves itself in first, which skips the global
// cgroup lock from Linux 5.17: cgroup.JoinThread).
func CloneIntoCgroup(mode string) Check {
	switch mode {
	case "none":
		return Check{Status: Info, Detail: "no cgroup to be born in"}
	case "cgroup1":
		if kernel.AtLeast(5, 17) {
			return Check{Status: Info, Detail: "not on cgroup v1, but the init is born in its cgroup all the same: the thread that clones it moves itself in first (Linux 5.17+)"}
		}
		return Check{Status: Info, Detail: "not on cgroup v1: the init is attached to its cgroup while it sets up (Linux 5.17+ would let it be born there)"}
	}
	if kernel.AtLeast(5, 7) {
		return Check{Status: OK, Detail: "cgroup v2 and Linux 5.7+: the init is born in its cgroup"}
	}
	return Check{Status: Warn, Detail: "Linux before 5.7: clone3 takes no cgroup, so the init is attached to its cgroup after the clone, while it sets up (its payload starts only once it is attached)", Fix: "a kernel of 5.7 or later"}
}

// InitBinary says which init sandboxes run: sbx-init from a sealed memfd
// (a build by make), or sbx itself re-executed, which starts slower (a
// second start of the whole binary) with every layer the same (issue 13).
// embedded: the build carries sbx-init; memfd: the sealed memfd was
// made; describe: initbin.Exe's phrase; execErr: what exec'ing the memfd
// outside a sandbox gave (initbin.Exe.Probe), which every sandbox's start
// depends on.
func InitBinary(embedded, memfd bool, describe string, execErr error) Check {
	switch {
	case memfd && execErr != nil:
		return Check{Status: Fail, Detail: fmt.Sprintf("%s, but it cannot be exec'd here: %v", describe, execErr), Fix: "allow exec from memfds (an LSM policy or vm.memfd_noexec refuses it), or build sbx with plain go build, whose init is sbx itself"}
	case memfd:
		return Check{Status: OK, Detail: describe}
	case embedded:
		return Check{Status: Warn, Detail: describe, Fix: "let memfd_create(2) make executable files: sysctl vm.memfd_noexec=0 or 1 (2 refuses them)"}
	}
	return Check{Status: Info, Detail: describe + " (a plain go build; make sbx embeds it)"}
}

// SbxBinary says which of make sbx's two builds runs (internal/fullbin)
// and, for the lean sbx, whether it can hand `sbx serve` to the full sbx
// it embeds here. lean: this is the lean sbx; size: its file's size;
// fullSize: the embedded full sbx's; handOffErr: what a real hand-off
// gave (fullbin.Probe). A failed hand-off warns: `sbx exec` and every
// other command of the lean sbx work, `sbx serve` does not.
func SbxBinary(lean bool, size, fullSize int64, handOffErr error) Check {
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	if !lean {
		return Check{Status: OK, Detail: fmt.Sprintf("the full sbx (%.1f MB): every command in this binary", mb(size))}
	}
	d := fmt.Sprintf("the lean sbx (%.1f MB, without serve and images); sbx serve, sbx image and the runs on an image run the full sbx (%.1f MB) it embeds, from a sealed memfd", mb(size), mb(fullSize))
	if handOffErr != nil {
		return Check{Status: Warn, Detail: d + ", which fails here: " + handOffErr.Error(),
			Fix: "allow exec from memfds (sysctl vm.memfd_noexec=0 or 1; an LSM policy), or run sbx serve and images from the full sbx that make sbx builds (internal/fullbin/sbx-full.bin)"}
	}
	return Check{Status: OK, Detail: d + ": it starts here"}
}
