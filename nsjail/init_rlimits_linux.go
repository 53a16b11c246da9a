package nsjail

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The payload's rlimits bind the payload, not the init. rlimits are per
// process and inherited at fork (getrlimit(2)), and nothing of ours runs
// between fork and execve in Go's ForkExec; an init that lowered its own
// limits to pass them on would run its workspace report under them
// (strict's RLIMIT_CPU backstop killed the walk: status ok, files []),
// and could never raise them back: raising a hard limit needs
// CAP_SYS_RESOURCE in the host's user namespace (kernel/sys.c,
// do_prlimit: capable(), not ns_capable()).
//
// So the payload's first process is held in the kernel at its setsid,
// which ForkExec makes between fork and execve (the init guard's hold
// rule, seccomp.ActHold), and the denial server's thread sets the limits
// on it with prlimit(2) before letting it continue. Where the kernel gave
// no listener there is no hold, and the init lowers its own limits before
// the fork, as before.

// payloadLimits sets the payload's rlimits on its first process.
type payloadLimits struct {
	rl   []Rlimit
	mu   sync.Mutex
	pid  int // the process held and limited; 0 until then
	err  error
	used bool
}

// hold is the seccomp hold callback: the first setsid in the sandbox is
// the payload's own, from ForkExec; later ones continue unchanged.
func (l *payloadLimits) hold(pid int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used {
		return nil
	}
	l.used, l.pid = true, pid
	l.err = prlimitAll(pid, l.rl)
	return l.err
}

// heldPid returns the process that was held and limited, and the error of
// limiting it.
func (l *payloadLimits) heldPid() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid, l.err
}

// prlimitAll sets rl on process pid; they only ever lower, which needs
// no privilege for a process of the same uid (prlimit(2)).
func prlimitAll(pid int, rl []Rlimit) error {
	var errs []error
	for _, r := range rl {
		lim := unix.Rlimit{Cur: r.Soft, Max: r.Hard}
		if err := unix.Prlimit(pid, rlimitResources[r.Resource], &lim, nil); err != nil {
			errs = append(errs, fmt.Errorf("prlimit(%d, %s, soft=%d hard=%d): %w", pid, r.Resource, r.Soft, r.Hard, err))
		}
	}
	return errors.Join(errs...)
}

// splitCore separates RLIMIT_CORE, which the init guard lets no filtered
// thread change, from the rest.
func splitCore(rl []Rlimit) (core, rest []Rlimit) {
	for _, r := range rl {
		if r.Resource == "RLIMIT_CORE" {
			core = append(core, r)
		} else {
			rest = append(rest, r)
		}
	}
	return core, rest
}

// forgetNofileRestore stops Go's ForkExec from setting the init's
// original soft RLIMIT_NOFILE back in the child after the hold
// (syscall/rlimit.go: syscall.Setrlimit clears what the runtime saved).
func forgetNofileRestore() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_NOFILE soft=%d hard=%d: %w", lim.Cur, lim.Max, err)
	}
	return nil
}

// rlimitResources names the setrlimit(2) resources a Spec may set.
var rlimitResources = map[string]int{
	"RLIMIT_AS":         unix.RLIMIT_AS,
	"RLIMIT_CORE":       unix.RLIMIT_CORE,
	"RLIMIT_CPU":        unix.RLIMIT_CPU,
	"RLIMIT_DATA":       unix.RLIMIT_DATA,
	"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
	"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
	"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
	"RLIMIT_STACK":      unix.RLIMIT_STACK,
	"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
	"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_NICE":       unix.RLIMIT_NICE,
	"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
}

// setRlimits applies the Spec's rlimits to the init; the payload inherits
// them. Lowering needs no privilege; they only ever lower.
func setRlimits(rl []Rlimit) error {
	for _, r := range rl {
		res := rlimitResources[r.Resource]
		lim := syscall.Rlimit{Cur: r.Soft, Max: r.Hard}
		// syscall.Setrlimit, not unix's: it also stops the runtime from
		// restoring its saved RLIMIT_NOFILE in the payload (syscall/rlimit.go).
		if err := syscall.Setrlimit(res, &lim); err != nil {
			return fmt.Errorf("setrlimit %s soft=%d hard=%d: %w", r.Resource, r.Soft, r.Hard, err)
		}
	}
	return nil
}
