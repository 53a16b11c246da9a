package main

import (
	"os"
	"os/signal"

	"github.com/sbx-sandbox/sbx/internal/sigfwd"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// signalsMark is when the signals' registration was done, for
// --debug-timings; taken after Channel. One done during the package inits
// is marked at main's start (t0): the timeline's main step stays the
// runtime and the inits.
func signalsMark(f *sigfwd.Forwarding, t0 int64) nsjail.Mark {
	if ns := f.RegisteredNS(); ns > t0 {
		return nsjail.Mark{Name: "sbx: signals registered (beside the CLI)", NS: ns}
	}
	return nsjail.Mark{Name: "sbx: signals registered (during the package inits)", NS: t0}
}

// stopForwarding ends the forwarding of sbx exec's signals to its payload
// once the run is over, without waiting for it. signal.Stop hands each of
// the three signals to the runtime's signal-mask thread and waits for it
// (sigdisable's maskUpdatedChan, runtime/signal_unix.go): three round
// trips between locked OS threads, ~0.45 ms of wall clock (median of 30
// interleaved runs on the dev VM, issue 13) on the way out of every run,
// after the Result is printed, just before the process exits. A signal
// that arrives meanwhile finds the buffered channel and is dropped, as
// one arriving after the payload ended always was; the registration ends
// with the process, or a moment later for a caller that goes on.
func stopForwarding(sigs chan os.Signal) { go signal.Stop(sigs) }
