//go:build cgo && !sbx_init_only && linux && amd64

package nsjail

/*
#include <errno.h>
#include <stdlib.h>
#include "spawn_linux.h"
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
)

// spawnPath and spawnPathCgroup say in --debug-timings which clone
// started the init: sbx_spawn's clone, or its clone3 into a v2 cgroup.
const (
	spawnPath       = "clone CLONE_VM, no full fork"
	spawnPathCgroup = "clone3 CLONE_VM|CLONE_INTO_CGROUP, no full fork"
)

// spawnInit starts cmd (initCmd's: its Path, Args, Env, files and
// SysProcAttr) with sbx_spawn (spawn_linux.c) instead of cmd.Start: a
// clone with CLONE_VM that copies none of the supervisor's page tables.
// It runs on the calling thread, which must be locked: the child gets
// its credentials, its cgroups and its Pdeathsig. On success cmd.Process
// is the init; wait for it with waitSpawned. UseCgroupFD: the init is
// born in that v2 cgroup (clone3 CLONE_INTO_CGROUP) or not at all.
// errSpawnUnsupported: the SysProcAttr asks for what sbx_spawn does not
// do, or the kernel has no clone3 CLONE_INTO_CGROUP (ENOSYS, E2BIG): use
// cmd.Start, which keeps UseCgroupFD, so the init is still born in its
// cgroup or fails to start (os/exec has no clone3 fallback either).
func spawnInit(cmd *exec.Cmd) error {
	attr := cmd.SysProcAttr
	if attr.PidFD != nil || attr.Setpgid || attr.Setctty || attr.Noctty ||
		attr.Chroot != "" || attr.Unshareflags != 0 || attr.Ptrace || attr.Foreground ||
		cmd.Dir != "" || len(attr.UidMappings) != 1 || len(attr.GidMappings) != 1 ||
		attr.Cloneflags&syscall.CLONE_NEWUSER == 0 {
		return errSpawnUnsupported
	}
	if attr.Credential != nil && (len(attr.Credential.Groups) != 0 || attr.Credential.NoSetGroups) {
		return errSpawnUnsupported
	}
	files := []*os.File{}
	for _, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		fp, ok := f.(*os.File)
		if !ok {
			return errSpawnUnsupported // os/exec would copy through a pipe
		}
		files = append(files, fp)
	}
	files = append(files, cmd.ExtraFiles...)
	if len(files) > C.SBX_SPAWN_MAXFD || len(attr.AmbientCaps) > C.SBX_SPAWN_MAXCAPS {
		return errSpawnUnsupported
	}

	a := (*C.struct_sbx_spawn)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sbx_spawn{}))))
	defer C.free(unsafe.Pointer(a))
	var cstrs []unsafe.Pointer
	cstr := func(s string) *C.char {
		p := C.CString(s)
		cstrs = append(cstrs, unsafe.Pointer(p))
		return p
	}
	cvec := func(ss []string) **C.char {
		v := (**C.char)(C.calloc(C.size_t(len(ss)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		cstrs = append(cstrs, unsafe.Pointer(v))
		vs := unsafe.Slice(v, len(ss)+1)
		for i, s := range ss {
			vs[i] = cstr(s)
		}
		return v
	}
	defer func() {
		for _, p := range cstrs {
			C.free(p)
		}
	}()
	a.path = cstr(cmd.Path)
	a.argv = cvec(cmd.Args)
	a.envp = cvec(cmd.Env)
	for i, f := range files {
		a.fds[i] = -1
		if f != nil {
			a.fds[i] = C.int(f.Fd())
		}
	}
	a.nfds = C.int(len(files))
	a.path_fd = C.int(pathFD(cmd.Path))
	a.cgroup_fd = -1
	if attr.UseCgroupFD {
		if attr.CgroupFD < 0 {
			return errSpawnUnsupported // os/exec names the bad fd
		}
		a.cgroup_fd = C.int(attr.CgroupFD)
	}
	a.flags = C.ulong(attr.Cloneflags)
	a.uid_map = cstr(idMapLine(attr.UidMappings[0]))
	a.gid_map = cstr(idMapLine(attr.GidMappings[0]))
	if attr.GidMappingsEnableSetgroups {
		a.setgroups = 1
	}
	if c := attr.Credential; c != nil {
		a.set_cred, a.uid, a.gid = 1, C.uint(c.Uid), C.uint(c.Gid)
	}
	for i, c := range attr.AmbientCaps {
		a.ambient[i] = C.int(c)
	}
	a.nambient = C.int(len(attr.AmbientCaps))
	a.pdeathsig = C.int(attr.Pdeathsig)
	if attr.Setsid {
		a.setsid = 1
	}
	// The files stay open (f.Fd above) until the child has its copies:
	// sbx_spawn returns only once it exec'd or is gone.
	r := C.sbx_spawn(a)
	runtime.KeepAlive(files) // no finalizer closes one during the call
	if r != 0 {
		if a.step == C.SBX_STEP_CLONE3 && (a.err == C.ENOSYS || a.err == C.E2BIG) {
			// Nothing was cloned. The kernel has no clone3 (< 5.3, or a
			// seccomp filter hides it) or no cgroup field in its
			// clone_args (< 5.7): os/exec tries the same clone3.
			return fmt.Errorf("%w: clone3 CLONE_INTO_CGROUP: %w", errSpawnUnsupported, syscall.Errno(a.err))
		}
		return &SpawnError{Step: C.GoString(C.sbx_spawn_step(a.step)), Args: spawnArgs(cmd, int(a.step)), Errno: syscall.Errno(a.err)}
	}
	p, err := os.FindProcess(int(a.pid))
	if err != nil {
		// Never on Linux (FindProcess only looks the pid up), but the
		// child is ours: do not leave it.
		syscall.Kill(int(a.pid), syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(int(a.pid), &ws, 0, nil)
		return fmt.Errorf("os.FindProcess %d: %w", a.pid, err)
	}
	cmd.Process = p
	return nil
}

// spawnArgs names a failed step's arguments where they say something.
func spawnArgs(cmd *exec.Cmd, step int) string {
	switch step {
	case C.SBX_STEP_EXECVE:
		return cmd.Path
	case C.SBX_STEP_CLONE:
		return cloneFlagNames(cmd.SysProcAttr.Cloneflags)
	case C.SBX_STEP_CLONE3:
		return fmt.Sprintf("%s|CLONE_INTO_CGROUP cgroup fd %d", cloneFlagNames(cmd.SysProcAttr.Cloneflags), cmd.SysProcAttr.CgroupFD)
	case C.SBX_STEP_UID_MAP:
		return strings.TrimSpace(idMapLine(cmd.SysProcAttr.UidMappings[0]))
	case C.SBX_STEP_GID_MAP:
		return strings.TrimSpace(idMapLine(cmd.SysProcAttr.GidMappings[0]))
	}
	return ""
}
