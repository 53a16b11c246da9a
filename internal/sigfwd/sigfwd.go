// Package sigfwd registers the signals `sbx exec` forwards to its payload
// from a package init, beside the other packages' inits and the CLI, off
// the path to the sandbox's clone (issue 13); main takes the registration
// (Early) and the run its channel (Forwarding.Channel). It imports only
// the standard library and x/sys/unix, so Go initializes it right after
// them (the spec's "Package initialization", Go 1.21+: import path order
// as soon as a package's imports are done), before the third-party inits.
package sigfwd

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/leanexec"
)

// early is this process's registration when it is `sbx exec`.
var early *Forwarding

// init begins the registration for `sbx exec` on two Ps (as root). On the
// one P of an unprivileged exec (leanexec, whose init runs first: it is
// imported) the goroutine's hand-offs to the signal-mask thread only
// interleave with the inits and the CLI on the same P, and cost more than
// they hide: ab.py, 100 pairs at load 6.4, uid 65534 +1.01 ms wall, root
// −2.08 ms (docs/DESIGN.md). There the run registers in line (InLine).
func init() {
	if len(os.Args) > 1 && os.Args[1] == "exec" && !leanexec.OneP(os.Args, os.Geteuid()) {
		early = Start()
	}
}

// Early is the registration begun by the package init: `sbx exec` on two
// Ps only (serve and repl register their own signals), nil otherwise.
func Early() *Forwarding { return early }

// Signals are the signals sbx exec passes to its payload once a
// sandbox exists (README, "Exit status"): SIGINT and SIGTERM; SIGHUP, for a
// closed terminal; SIGQUIT, for Ctrl-\, which the payload, in a session
// of its own (setsid), never gets from the terminal. Go's default for
// SIGQUIT is a goroutine dump and exit 2, which ended sbx mid-run with a
// Go stack and left the sandbox's cgroup to the next run's stale
// cleanup. Any other signal has Go's default action.
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Forwarding is sbx exec's registration of Signals, begun on a goroutine
// of its own from this package's init (issue 13): signal.Notify hands each
// signal to the runtime's signal-mask thread and waits for it (sigenable's
// enableSigChan and maskUpdatedChan, runtime/signal_unix.go; ensureSigM
// starts that locked thread on the first call), a cross-thread round trip
// per signal, 0.4–0.9 ms of wall clock that used to lie on the path to the
// sandbox's cgroup and clone. Until the run takes the channel, a signal
// the registration caught does what it did before Notify (preCommit): sbx
// dies of it, or drops it if sbx was started with it ignored. So Ctrl-C
// still ends sbx at once while it reads a script from stdin or pulls an
// image, and nothing is left behind, as nothing was made yet (a script
// read from stdin is held in a file unlinked from the start: main's
// readPipedScript).
type Forwarding struct {
	sigs chan os.Signal
	// registered is closed once Notify returned, at registeredNS
	// (CLOCK_MONOTONIC, for --debug-timings).
	registered   chan struct{}
	registeredNS int64
	// commit asks preCommit to hand sigs over; handed is its answer.
	commit, handed chan struct{}
}

// Start begins the registration, and preCommit's watch once it is done.
func Start() *Forwarding {
	f := &Forwarding{
		sigs:       make(chan os.Signal, 4),
		registered: make(chan struct{}),
		commit:     make(chan struct{}),
		handed:     make(chan struct{}),
	}
	go f.register()
	return f
}

func (f *Forwarding) register() {
	signal.Notify(f.sigs, Signals...)
	f.registeredNS = monotonicNS()
	close(f.registered)
	f.preCommit()
}

// preCommit stands in for the disposition each forwarded signal had
// before Notify, until the run takes the channel.
func (f *Forwarding) preCommit() {
	for {
		select {
		case sig := <-f.sigs:
			f.unregisteredAction(sig.(syscall.Signal))
		case <-f.commit:
			close(f.handed)
			return
		}
	}
}

// unregisteredAction gives sig what it got without a Notify for it: the
// registration is undone (signal.Reset) and sig raised again on this
// thread (tgkill(2), handled as the syscall returns). The runtime's
// handler, wanted by no one, then kills sbx by sig's default action
// (dieFromSignal, runtime/signal_unix.go), as its parent sees in wait(2),
// or, if sbx was started with sig ignored (a nohup'd SIGHUP, which Go
// keeps ignored: sigInstallGoHandler), drops it; then sig is registered
// again, to be forwarded as before once a sandbox exists.
func (f *Forwarding) unregisteredAction(sig syscall.Signal) {
	signal.Reset(sig)
	runtime.LockOSThread()
	unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
	runtime.UnlockOSThread()
	signal.Notify(f.sigs, sig)
}

// Channel is called right before the first step that makes something to
// clean up (engine.Run: the cgroup, the init): it waits for the
// registration and for preCommit to let go, and returns the channel the
// run forwards from. A signal from here on reaches the payload, or ends
// the report (nsjail's watch); one caught just before was acted on by
// preCommit first, and killed sbx before it built anything.
func (f *Forwarding) Channel() chan os.Signal {
	<-f.registered
	close(f.commit)
	<-f.handed
	return f.sigs
}

// InLine registers Signals now and returns their channel: the run's
// registration where no Early one was begun, at the same point, before
// anything is made.
func InLine() chan os.Signal {
	c := make(chan os.Signal, 4)
	signal.Notify(c, Signals...)
	return c
}

// RegisteredNS is when Notify returned, on CLOCK_MONOTONIC, for
// --debug-timings; call it after Channel.
func (f *Forwarding) RegisteredNS() int64 { return f.registeredNS }

// monotonicNS is CLOCK_MONOTONIC in ns, the clock of --debug-timings
// (nsjail.MonotonicNS, which this package cannot import: its inits would
// run first).
func monotonicNS() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
