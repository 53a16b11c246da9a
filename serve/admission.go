package serve

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Why admission refuses a run.
var (
	errFull     = errors.New("every worker is busy and the queue is full")
	errDraining = errors.New("the server is shutting down (SIGTERM): it takes no new runs")
)

// admission lets max runs go at once and queue more wait for a worker;
// past both it refuses at once (429), never letting a request wait
// without bound. The admitted count is the only state: no request waits
// unless it holds a place in it, so its memory is bounded by max+queue.
type admission struct {
	max, queue int
	slots      chan struct{}
	// starts are the slots the warm pools' starts hold (startBudget):
	// workers, but not runs.
	starts atomic.Int64

	mu       sync.Mutex
	admitted int
	closed   bool
	// idle is closed when the admission is closed and nothing is
	// admitted any more.
	idle chan struct{}
}

func newAdmission(max, queue int) *admission {
	return &admission{max: max, queue: queue, slots: make(chan struct{}, max), idle: make(chan struct{})}
}

// enter takes a place (running or waiting), or says why there is none.
func (a *admission) enter() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return errDraining
	case a.admitted >= a.max+a.queue:
		return errFull
	}
	a.admitted++
	return nil
}

// acquire waits for a worker, after enter; it gives up when ctx ends (the
// client went away, or the drain timed out).
func (a *admission) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// leave gives the place back; ran says acquire succeeded.
func (a *admission) leave(ran bool) {
	if ran {
		<-a.slots
	}
	a.mu.Lock()
	a.admitted--
	if a.closed && a.admitted == 0 {
		close(a.idle)
	}
	a.mu.Unlock()
}

// close refuses every new run; idle is closed once the admitted are done.
func (a *admission) close() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		if a.admitted == 0 {
			close(a.idle)
		}
	}
	return a.idle
}

func (a *admission) running() int { return max(len(a.slots)-int(a.starts.Load()), 0) }

func (a *admission) waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.admitted - len(a.slots)
}

// full: a new run would be refused.
func (a *admission) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.admitted >= a.max+a.queue
}
