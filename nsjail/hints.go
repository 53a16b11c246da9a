package nsjail

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// startError explains why the kernel refused to create the namespaces.
func startError(err error) error {
	// A step of spawnInit other than the clone itself (the id maps, the
	// child's set-up, its execve) is that step's failure, not the
	// kernel's refusal of a namespace: it is named as it is.
	var se *SpawnError
	if errors.As(err, &se) && se.Step != spawnStepClone && se.Step != spawnStepClone3 {
		return fmt.Errorf("starting the sandbox init: %w", err)
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case unix.EPERM, unix.EACCES:
		if se != nil && se.Step == spawnStepClone3 {
			// clone3 CLONE_INTO_CGROUP also fails so when the caller may
			// not write the cgroup.procs of the target and of the common
			// ancestor (cgroup-v2.rst, "Delegation Containment").
			return fmt.Errorf("creating the sandbox's user namespace in its cgroup (%v): %w; either the cgroup refused the init (cgroup.procs not writable) or unprivileged user namespaces are disabled on this host: %s", se, errno, userNSFix())
		}
		return fmt.Errorf("creating the sandbox's user namespace: %w; unprivileged user namespaces are disabled on this host: %s", errno, userNSFix())
	case unix.ENOSPC, unix.EUSERS:
		return fmt.Errorf("creating the sandbox's namespaces: %w; the per-user namespace limit is reached (raise user.max_user_namespaces and user.max_*_namespaces with sysctl)", errno)
	case unix.EINVAL:
		return fmt.Errorf("creating the sandbox's namespaces: %w; the kernel lacks user, pid, net, ipc, uts or cgroup namespaces", errno)
	}
	return fmt.Errorf("starting the sandbox init: %w", err)
}

// userNSFix names the setting that forbids unprivileged user namespaces.
func userNSFix() string {
	var fixes []string
	if v, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(v)) == "1" {
		fixes = append(fixes, "AppArmor restricts them: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
	}
	if v, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(v)) == "0" {
		fixes = append(fixes, "sysctl -w kernel.unprivileged_userns_clone=1")
	}
	if v, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(v)) == "0" {
		fixes = append(fixes, "sysctl -w user.max_user_namespaces=15000")
	}
	if len(fixes) == 0 {
		return "check kernel.unprivileged_userns_clone, user.max_user_namespaces and kernel.apparmor_restrict_unprivileged_userns"
	}
	return strings.Join(fixes, "; ")
}

// withHint adds the likely cause to a setup step's EPERM: a user namespace
// that AppArmor left without capabilities fails at the first mount.
func withHint(e *StepError) error {
	if e.Errno == unix.EPERM {
		if v, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(v)) == "1" {
			return fmt.Errorf("%w (AppArmor restricts unprivileged user namespaces: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)", e)
		}
	}
	return e
}
