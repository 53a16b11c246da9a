package nsjail

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/seccomp/install"
)

// loadSeccomp installs the filter on the init's locked thread, the one the
// payload is forked from. It returns the user-notification listener, or
// -1 when the filter reports nothing (no filter, or a kernel that gave no
// listener: install.Load then installs the same denials unreported).
//
// Only this thread is filtered, not the whole init (no TSYNC): the
// payload inherits the filter at fork, and every thread it ever makes
// inherits it from there; the init's other threads serve the
// notifications and must not wait on them.
func loadSeccomp(f *install.Filter) (int, error) {
	if f == nil {
		return -1, nil
	}
	return install.Load(f)
}

// maxDenialKinds bounds how many distinct syscall numbers the denial
// counts keep by number; calls of any further number are counted together
// in other. A payload can make calls with ~2^32 numbers, and each would be
// a key of the exit status line: 100,000 of them once made it longer than
// the supervisor would read (issue 11, finding 2).
const maxDenialKinds = 256

// denialServer answers and counts the payload's denied syscalls.
type denialServer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	counts map[int]int
	// other counts the calls of numbers beyond maxDenialKinds.
	other int
	// killed are the processes (thread group ids) killed for a call
	// through another ABI, at most maxDenialKinds of them.
	killed map[int]bool
	// reported is false when denials happen unseen (a filter without a
	// listener).
	reported bool
}

func (in *initProc) startDenialServer(f *install.Filter, listener int) {
	if f == nil {
		return
	}
	d := &denialServer{done: make(chan struct{}), counts: map[int]int{}, killed: map[int]bool{}, reported: listener >= 0}
	in.denials = d
	if listener < 0 {
		close(d.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		defer close(d.done)
		// Closing the listener on the way out makes any later denied
		// call fail at once (ENOSYS) instead of waiting for an answer.
		defer unix.Close(listener)
		err := install.ServeAndKill(ctx, listener, f, d.count, in.holdPayload, d.kill)
		if err != nil {
			in.send(StatusMsg{Kind: kindWarning, Msg: fmt.Sprintf("seccomp notifications: %v; denials after this are not counted", err)})
			d.mu.Lock()
			d.reported = false
			d.mu.Unlock()
		}
	}()
}

// holdPayload is the denial server's hold callback (seccomp.ActHold).
func (in *initProc) holdPayload(pid int) error {
	if in.limits == nil {
		return nil
	}
	return in.limits.hold(pid)
}

// count records one denied call of syscall nr, by its number while fewer
// than maxDenialKinds numbers are known, else in other.
func (d *denialServer) count(nr int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.counts[nr]; ok || len(d.counts) < maxDenialKinds {
		d.counts[nr]++
		return
	}
	d.other++
}

// kill records that the server killed process tgid for the filter.
func (d *denialServer) kill(tgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.killed) < maxDenialKinds {
		d.killed[tgid] = true
	}
}

// denialCounts is what the denial server saw, for the exit message.
type denialCounts struct {
	byNr  map[int]int
	other int
	known bool
	// killed are the processes killed for the filter (seccomp.ServeAndKill).
	killed map[int]bool
}

// stop ends the server once every process of the payload is gone and
// returns the counts (known is false when they are unknown).
func (d *denialServer) stop() denialCounts {
	if d.cancel != nil {
		d.cancel()
	}
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.reported {
		return denialCounts{killed: d.killed}
	}
	return denialCounts{byNr: d.counts, other: d.other, known: true, killed: d.killed}
}
