package nsjail

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initIgnoredSignals are the signals for which the Go runtime installs a
// handler that ends the process (or dumps goroutines to fd 2, the
// payload's stderr) when one arrives by kill(2). The init is pid 1 of the
// sandbox's pid namespace: the kernel drops signals sent from inside it
// that are ignored or left at SIG_DFL (pid_namespaces(7)), so once these
// are ignored the payload cannot kill its own init and lose its exit
// status. SIGCHLD (needed for wait4), SIGURG (preemption) and SIGPROF stay
// with the runtime. The supervisor talks to the init over the control
// pipe, never with signals.
var initIgnoredSignals = []unix.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
	unix.SIGBUS, unix.SIGFPE, unix.SIGUSR1, unix.SIGSEGV, unix.SIGUSR2, unix.SIGPIPE,
	unix.SIGALRM, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM,
	unix.SIGIO, unix.SIGPWR, unix.SIGSYS,
}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on
// amd64 and arm64 (handler, flags, restorer, mask).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const (
	sigDfl = 0 // SIG_DFL
	sigIgn = 1 // SIG_IGN
)

// ignoreSignals sets SIG_IGN with rt_sigaction directly rather than with
// os/signal, for two reasons. signal.Notify costs about 50 µs a signal
// (each one is a round trip to the runtime's signal-mask thread), which is
// a millisecond of every sandbox's start. And an ignored disposition is
// inherited across execve (signal(7)), which must not reach the payload:
// the runtime still believes it handles these signals, so the child side
// of syscall.ForkExec resets each one to SIG_DFL before exec
// (runtime.clearSignalHandlers). TestPayloadSignalDispositions holds this.
//
// Any other signal that arrived ignored (inherited from whoever started
// sbx, e.g. glibc's signal 32 left ignored by a parent, or SIGTTOU) is set
// back to SIG_DFL here, since the runtime would not reset it for the child.
func ignoreSignals() error {
	ignore := map[unix.Signal]bool{}
	for _, sig := range initIgnoredSignals {
		ignore[sig] = true
		if err := sigaction(sig, sigIgn); err != nil {
			return err
		}
	}
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if ignore[sig] || sig == unix.SIGKILL || sig == unix.SIGSTOP {
			continue
		}
		var old kernelSigaction
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
		if errno == 0 && old.handler == sigIgn {
			if err := sigaction(sig, sigDfl); err != nil {
				return err
			}
		}
	}
	return nil
}

func sigaction(sig unix.Signal, handler uintptr) error {
	act := kernelSigaction{handler: handler}
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if errno != 0 {
		return fmt.Errorf("rt_sigaction(%d, %#x): %w", int(sig), handler, errno)
	}
	return nil
}
