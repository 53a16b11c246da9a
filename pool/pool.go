// Package pool keeps warm sandboxes ready for one profile (issue 14, item
// 4): N sandboxes fully set up ahead of time (namespaces, cgroup, mounts,
// confinement, the interpreter started with the profile's preload
// imported), each handed out by Claim for exactly one request and then
// destroyed by its Exec, a replacement started in the background.
//
// Claim never waits: with no ready sandbox it reports a miss, and the
// caller runs cold (nsjail.Run). A pool whose sandboxes cannot be built
// backs off between attempts and keeps reporting misses; it never makes a
// request wait on it. Starts run within a Budget shared with whatever else
// bounds the host's work (sbx serve's --max-concurrent). The target grows
// by one toward Max on each miss and shrinks by one toward Min after each
// IdleAfter without a miss. Close tears everything down.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// Handle is what the pool needs of a sandbox: *nsjail.Sandbox (the pool
// is generic only so that its unit tests can run without sandboxes).
type Handle interface {
	// Done is closed once the sandbox is gone.
	Done() <-chan struct{}
	// Close destroys it.
	Close() error
}

// Starter builds one sandbox up to ready (nsjail.Start of a warm Job, a
// fresh Job each time). ctx is cancelled by Close.
type Starter[S Handle] func(ctx context.Context) (S, error)

// Sandboxes is the pool sbx serves from.
type Sandboxes = Pool[*nsjail.Sandbox]

// StartJob is the Starter of nsjail.Start(ctx, job()).
func StartJob(job func() *nsjail.Job) Starter[*nsjail.Sandbox] {
	return func(ctx context.Context) (*nsjail.Sandbox, error) { return nsjail.Start(ctx, job()) }
}

// Budget bounds how many sandboxes are being started at once, across
// pools and whatever else shares it.
type Budget interface {
	// Acquire takes one slot, waiting for it until ctx ends.
	Acquire(ctx context.Context) error
	// Release gives back a slot Acquire took.
	Release()
}

// NewBudget is a Budget of n slots (at least one).
func NewBudget(n int) Budget { return make(semaphore, max(n, 1)) }

type semaphore chan struct{}

func (s semaphore) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s semaphore) Release() { <-s }

// Config is one profile's pool.
type Config[S Handle] struct {
	// Profile names the pool (Stats, errors).
	Profile string
	// Min is how many ready sandboxes the pool keeps when idle (N of
	// --pool PROFILE=N); Max is how far the target grows under demand
	// (Min when 0).
	Min, Max int
	// Start builds one sandbox.
	Start Starter[S]
	// Budget bounds concurrent starts; nil: one at a time.
	Budget Budget
	// IdleAfter is how long without a miss before the target shrinks by
	// one toward Min; 0: a minute.
	IdleAfter time.Duration
	// OnStart, if set, is told of every start's duration and error (a
	// metrics histogram and counter); it must not block.
	OnStart func(d time.Duration, err error)
	// RefillAfter bounds how long the refill of a claimed sandbox waits
	// for that sandbox's run to end; 0: DefaultRefillAfter.
	RefillAfter time.Duration
}

// DefaultRefillAfter is Config.RefillAfter's default. A refill started at
// claim time builds a sandbox (clone, mounts, an interpreter with its
// preload: tens of ms of CPU) while the claimed run, which is what the
// client waits for, needs the same CPUs: measured on 2 CPUs, the run's
// payload start and exit took several ms longer. So the replacement
// starts once the claimed sandbox's init has ended (Handle.Done), or
// after this long if the run goes on: a long run holds its replacement
// back by no more than this. A claim that leaves none ready is not
// deferred: the next request would miss and run cold (several times a
// warm run's cost), so under demand the refill starts at once, as does
// the growth a miss asks for.
const DefaultRefillAfter = time.Second

// Backoff between failed starts: doubling from backoffMin to backoffMax,
// reset by a success. A pool that cannot build sandboxes (a broken
// preload, a host without user namespaces) costs one attempt per
// backoffMax, and Claim reports misses meanwhile.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 30 * time.Second
)

// Stats are the pool's counters, as plain data for the server's metrics
// (sbx_pool_idle, sbx_pool_target, sbx_pool_claims_total{result},
// sbx_sandbox_start_duration_seconds, sbx_sandbox_start_failures_total).
type Stats struct {
	Profile string
	// Idle are ready sandboxes; Starting are being built; Target is
	// what the pool fills toward, within Min..Max.
	Idle, Starting, Target, Min, Max int
	// Hits and Misses count claims.
	Hits, Misses uint64
	// Started and StartFailures count starts; StartSeconds is the sum
	// of the successful ones' durations, LastStart the latest.
	Started, StartFailures uint64
	StartSeconds           float64
	LastStart              time.Duration
	// LastError is the latest start failure, "" after a success.
	LastError string
	// DiedIdle counts ready sandboxes that ended while they waited
	// (dropped, never handed out).
	DiedIdle uint64
}

// Pool is one profile's warm sandboxes.
type Pool[S Handle] struct {
	cfg    Config[S]
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	wg     sync.WaitGroup // the manager, the starts and the idle watches

	mu       sync.Mutex
	idle     []*entry[S] // oldest first
	starting int
	// deferred are claimed sandboxes whose replacement waits for their
	// run to end (refillAfter): counted as filled until then.
	deferred int
	target   int
	lastMiss time.Time
	failures int       // consecutive start failures
	retryAt  time.Time // no start before this after a failure
	closed   bool
	st       Stats
}

// entry is one ready sandbox and the watch that drops it if it dies.
type entry[S Handle] struct {
	sb      S
	claimed chan struct{}
}

// New starts the pool: it fills toward Min in the background.
func New[S Handle](cfg Config[S]) (*Pool[S], error) {
	if cfg.Start == nil {
		return nil, errors.New("pool: no Start")
	}
	if cfg.Min < 0 || cfg.Max < 0 || cfg.Max > 0 && cfg.Max < cfg.Min {
		return nil, fmt.Errorf("pool %s: min %d, max %d: want 0 <= min <= max", cfg.Profile, cfg.Min, cfg.Max)
	}
	if cfg.Max == 0 {
		cfg.Max = cfg.Min
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(1)
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = time.Minute
	}
	if cfg.RefillAfter <= 0 {
		cfg.RefillAfter = DefaultRefillAfter
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[S]{cfg: cfg, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), target: cfg.Min, lastMiss: time.Now()}
	p.st = Stats{Profile: cfg.Profile, Min: cfg.Min, Max: cfg.Max}
	p.wg.Add(1)
	go p.manage()
	return p, nil
}

// Claim hands out a ready sandbox, which is the caller's from then on:
// it serves one Exec (which destroys it) or is Closed. With none ready
// it returns false at once (a miss: run cold), and the target grows.
func (p *Pool[S]) Claim(ctx context.Context) (S, bool) {
	var none S
	if ctx.Err() != nil {
		return none, false
	}
	var dead []S
	defer func() {
		for _, sb := range dead {
			sb.Close()
		}
	}()
	defer p.poke()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 && !p.closed {
		e := p.idle[0]
		p.idle = p.idle[1:]
		close(e.claimed)
		select {
		case <-e.sb.Done():
			// It ended, and its watch has not dropped it yet.
			dead = append(dead, e.sb)
			p.st.DiedIdle++
			continue
		default:
		}
		p.st.Hits++
		p.deferred++
		p.wg.Add(1)
		go p.refillAfter(e.sb)
		return e.sb, true
	}
	p.st.Misses++
	p.lastMiss = time.Now()
	if !p.closed && p.target < p.cfg.Max {
		p.target++
	}
	return none, false
}

// Stats returns the counters.
func (p *Pool[S]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	st.Idle, st.Starting, st.Target = len(p.idle), p.starting, p.target
	return st
}

// Close stops the refills and destroys every sandbox not handed out:
// starts in flight are cancelled, the ready ones closed; no process,
// cgroup, mount or temp dir of the pool is left when it returns.
// Sandboxes already claimed are their callers'.
func (p *Pool[S]) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	p.cancel()
	for _, e := range idle {
		close(e.claimed)
		e.sb.Close()
	}
	p.wg.Wait()
	return nil
}

func (p *Pool[S]) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// manage starts sandboxes toward the target and shrinks it when idle.
func (p *Pool[S]) manage() {
	defer p.wg.Done()
	tick := time.NewTicker(min(p.cfg.IdleAfter/4, time.Second))
	defer tick.Stop()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		now := time.Now()
		if p.target > p.cfg.Min && now.Sub(p.lastMiss) >= p.cfg.IdleAfter {
			p.target--
			p.lastMiss = now // one step per IdleAfter
		}
		var drop []*entry[S]
		for len(p.idle) > p.target {
			// Newest first: the oldest are handed out next.
			e := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			close(e.claimed)
			drop = append(drop, e)
		}
		n := 0
		if now.After(p.retryAt) {
			n = p.target - len(p.idle) - p.starting - p.pending()
			if p.failures > 0 {
				n = min(n, 1) // probe one at a time while failing
			}
		}
		for i := 0; i < n; i++ {
			p.starting++
			p.wg.Add(1)
			go p.startOne()
		}
		wait := time.Duration(0)
		if n <= 0 && p.target > len(p.idle)+p.starting+p.pending() && p.retryAt.After(now) {
			wait = p.retryAt.Sub(now)
		}
		p.mu.Unlock()
		for _, e := range drop {
			e.sb.Close()
		}
		var retry <-chan time.Time
		if wait > 0 {
			retry = time.After(wait)
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		case <-retry:
		}
	}
}

// pending are the deferred refills the manager holds back: none when no
// sandbox is ready (DefaultRefillAfter says why), nor when more than one
// claimed run goes on (a server under load: refilling at once kept its
// runs/s). p.mu is held.
func (p *Pool[S]) pending() int {
	if len(p.idle) == 0 || p.deferred > 1 {
		return 0
	}
	return p.deferred
}

// refillAfter lets the manager replace a claimed sandbox once its run has
// ended, or RefillAfter after the claim, whichever comes first
// (DefaultRefillAfter says why), or at Close.
func (p *Pool[S]) refillAfter(sb S) {
	defer p.wg.Done()
	t := time.NewTimer(p.cfg.RefillAfter)
	defer t.Stop()
	select {
	case <-sb.Done():
	case <-t.C:
	case <-p.ctx.Done():
	}
	p.mu.Lock()
	p.deferred--
	p.mu.Unlock()
	p.poke()
}

// startOne builds one sandbox within the budget and adds it to the idle
// list, or records why it failed.
func (p *Pool[S]) startOne() {
	defer p.wg.Done()
	defer p.poke()
	if err := p.cfg.Budget.Acquire(p.ctx); err != nil {
		p.mu.Lock()
		p.starting--
		p.mu.Unlock()
		return
	}
	t0 := time.Now()
	sb, err := p.cfg.Start(p.ctx)
	d := time.Since(t0)
	p.cfg.Budget.Release()
	if p.ctx.Err() != nil && err != nil {
		// Cancelled by Close: not a failure of the profile.
		p.mu.Lock()
		p.starting--
		p.mu.Unlock()
		return
	}
	if p.cfg.OnStart != nil {
		p.cfg.OnStart(d, err)
	}
	p.mu.Lock()
	p.starting--
	if err != nil {
		p.st.StartFailures++
		p.st.LastError = err.Error()
		p.failures++
		p.retryAt = time.Now().Add(min(backoffMax, backoffMin<<min(p.failures-1, 20)))
		p.mu.Unlock()
		return
	}
	p.failures, p.retryAt = 0, time.Time{}
	p.st.Started++
	p.st.StartSeconds += d.Seconds()
	p.st.LastStart = d
	p.st.LastError = ""
	if p.closed || len(p.idle) >= p.target {
		p.mu.Unlock()
		sb.Close()
		return
	}
	e := &entry[S]{sb: sb, claimed: make(chan struct{})}
	p.idle = append(p.idle, e)
	p.wg.Add(1)
	p.mu.Unlock()
	go p.watchIdle(e)
}

// watchIdle drops a ready sandbox that ends before it is claimed (its
// init or interpreter died: the OOM killer, a host kill).
func (p *Pool[S]) watchIdle(e *entry[S]) {
	defer p.wg.Done()
	select {
	case <-e.claimed:
		return
	case <-e.sb.Done():
	}
	p.mu.Lock()
	found := false
	for i, x := range p.idle {
		if x == e {
			p.idle = append(p.idle[:i:i], p.idle[i+1:]...)
			found = true
			break
		}
	}
	if found {
		close(e.claimed)
		p.st.DiedIdle++
	}
	p.mu.Unlock()
	if found {
		e.sb.Close()
		p.poke()
	}
}

// Set is the pools of several profiles, by profile name.
type Set[S Handle] map[string]*Pool[S]

// Claim claims from the profile's pool; a profile without one is a miss.
func (s Set[S]) Claim(ctx context.Context, profile string) (S, bool) {
	if p, ok := s[profile]; ok {
		return p.Claim(ctx)
	}
	var none S
	return none, false
}

// Stats returns every pool's counters.
func (s Set[S]) Stats() []Stats {
	out := make([]Stats, 0, len(s))
	for _, p := range s {
		out = append(out, p.Stats())
	}
	return out
}

// Close closes every pool, in parallel.
func (s Set[S]) Close() error {
	var wg sync.WaitGroup
	for _, p := range s {
		wg.Add(1)
		go func(p *Pool[S]) { defer wg.Done(); p.Close() }(p)
	}
	wg.Wait()
	return nil
}
