package nsjail

import (
	"strings"
	"syscall"
	"testing"
)

// TestStartErrorNamesTheSpawnStep: only the clone's EPERM or EACCES is a
// refused user namespace; a later step's is that step's, named. The CI
// failure that showed the memfd clobbered (TestSpawnInitKeepsThePathFD)
// was reported as "unprivileged user namespaces are disabled".
func TestStartErrorNamesTheSpawnStep(t *testing.T) {
	exec := startError(&SpawnError{Step: "execve", Args: "/proc/self/fd/100", Errno: syscall.EACCES})
	if s := exec.Error(); strings.Contains(s, "user namespace") || !strings.Contains(s, "execve /proc/self/fd/100: permission denied") {
		t.Errorf("execve's EACCES: %q", s)
	}
	clone := startError(&SpawnError{Step: spawnStepClone, Args: "CLONE_NEWUSER", Errno: syscall.EPERM})
	if s := clone.Error(); !strings.Contains(s, "creating the sandbox's user namespace") {
		t.Errorf("the clone's EPERM: %q", s)
	}
	clone3 := startError(&SpawnError{Step: spawnStepClone3, Args: "CLONE_VM|CLONE_NEWUSER|CLONE_INTO_CGROUP cgroup fd 9", Errno: syscall.EACCES})
	if s := clone3.Error(); !strings.Contains(s, "creating the sandbox's user namespace") || !strings.Contains(s, "cgroup fd 9") || !strings.Contains(s, "cgroup refused") {
		t.Errorf("the clone3's EACCES: %q", s)
	}
	if s := startError(syscall.EPERM).Error(); !strings.Contains(s, "creating the sandbox's user namespace") {
		t.Errorf("os/exec's EPERM: %q", s)
	}
}
