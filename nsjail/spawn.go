package nsjail

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// errSpawnUnsupported: the init starts through cmd.Start (os/exec), as
// before spawnInit: a build without it (no cgo, not amd64), a
// SysProcAttr it does not handle, or a kernel without clone3
// CLONE_INTO_CGROUP when a cgroup fd is asked for.
var errSpawnUnsupported = errors.New("spawnInit: not supported here")

// spawnStepClone and spawnStepClone3 are the names spawn_linux.c gives
// the clone itself (step_names): the steps whose EPERM is a refused
// namespace, as os/exec's clone error was.
const (
	spawnStepClone  = "clone"
	spawnStepClone3 = "clone3"
)

// SpawnError is a failed step of spawnInit, in the child or the parent.
type SpawnError struct {
	Step, Args string
	Errno      syscall.Errno
}

func (e *SpawnError) Error() string {
	if e.Args == "" {
		return fmt.Sprintf("%s: %v", e.Step, e.Errno)
	}
	return fmt.Sprintf("%s %s: %v", e.Step, e.Args, e.Errno)
}

func (e *SpawnError) Unwrap() error { return e.Errno }

// idMapLine is one line of /proc/PID/[ug]id_map (user_namespaces(7)).
func idMapLine(m syscall.SysProcIDMap) string {
	return fmt.Sprintf("%d %d %d\n", m.ContainerID, m.HostID, m.Size)
}

// cloneFlagNames spells the namespace flags of a clone.
func cloneFlagNames(f uintptr) string {
	names := []struct {
		bit  uintptr
		name string
	}{
		{syscall.CLONE_NEWUSER, "CLONE_NEWUSER"}, {syscall.CLONE_NEWNS, "CLONE_NEWNS"},
		{syscall.CLONE_NEWPID, "CLONE_NEWPID"}, {syscall.CLONE_NEWNET, "CLONE_NEWNET"},
		{syscall.CLONE_NEWIPC, "CLONE_NEWIPC"}, {syscall.CLONE_NEWUTS, "CLONE_NEWUTS"},
		{syscall.CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
	}
	var out []string
	for _, n := range names {
		if f&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(append([]string{"CLONE_VM"}, out...), "|")
}

// waitSpawned waits for an init spawnInit started and fills
// cmd.ProcessState, as cmd.Wait does for one cmd.Start started.
func waitSpawned(cmd *exec.Cmd) error {
	st, err := cmd.Process.Wait()
	if err != nil {
		return err
	}
	cmd.ProcessState = st
	if !st.Success() {
		return &exec.ExitError{ProcessState: st}
	}
	return nil
}

// cloneMark is the timeline's step for the init's clone, naming the path
// that ran: intoCgroup, the init was born in its v2 cgroup.
func cloneMark(spawned, intoCgroup bool) string {
	switch {
	case spawned && intoCgroup:
		return "sbx: clone+exec init (" + spawnPathCgroup + ")"
	case spawned:
		return "sbx: clone+exec init (" + spawnPath + ")"
	}
	return "sbx: clone+exec init (cmd.Start)"
}
