package serve

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/pool"
)

// PoolSpec is one entry of --pool: keep Min warm sandboxes of Profile
// ready, growing toward Max under demand.
type PoolSpec struct {
	// Profile is one of --profiles (a built-in name or a file's path).
	Profile string
	// Min are kept ready when idle; Max is how far the pool grows under
	// demand (Min when 0).
	Min, Max int
}

// maxPoolSize bounds N and MAX of --pool: each warm sandbox holds an
// interpreter and its preload (tens of MB with the data stack), so a
// typo of 10000 would take the host's memory.
const maxPoolSize = 256

// ParsePools reads --pool's values, PROFILE=N or PROFILE=N:MAX each
// (a list flag's values, already split at commas). The errors name the
// flag, the entry and what is wrong.
func ParsePools(vals []string) ([]PoolSpec, error) {
	var out []PoolSpec
	seen := map[string]bool{}
	for _, v := range vals {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("--pool %q: %s; want PROFILE=N or PROFILE=N:MAX, e.g. --pool standard=4,data=2:8", v, why)
		}
		name, sizes, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, bad("no PROFILE=")
		}
		minS, maxS, hasMax := strings.Cut(sizes, ":")
		n, err := strconv.Atoi(minS)
		if err != nil || n < 0 || n > maxPoolSize {
			return nil, bad(fmt.Sprintf("N %q: want a number from 0 to %d", minS, maxPoolSize))
		}
		m := n
		if hasMax {
			if m, err = strconv.Atoi(maxS); err != nil || m < 1 || m > maxPoolSize {
				return nil, bad(fmt.Sprintf("MAX %q: want a number from 1 to %d", maxS, maxPoolSize))
			}
			if m < n {
				return nil, bad(fmt.Sprintf("MAX %d below N %d", m, n))
			}
		}
		if m == 0 {
			return nil, bad("a pool of 0 sandboxes that never grows; leave the profile out to run it cold")
		}
		if seen[name] {
			return nil, bad(fmt.Sprintf("profile %s given twice", name))
		}
		seen[name] = true
		out = append(out, PoolSpec{Profile: name, Min: n, Max: m})
	}
	return out, nil
}

// PoolFeed is what the warm pools tell the server's metrics (the
// sbx_pool_* and sbx_sandbox_start_* ones); the method set is the
// metrics' PoolObserver. Profile is the profile's name, as the Result's
// profile field says it. It must not block.
type PoolFeed interface {
	// PoolSize: how many sandboxes of profile are ready and how many the
	// pool aims at now.
	PoolSize(profile string, idle, target int)
	// PoolClaim counts one claim: hit, a warm sandbox was handed out;
	// miss, none was ready and the run went cold.
	PoolClaim(profile string, hit bool)
	// SandboxStarted counts one warm sandbox built (err nil) or failed.
	SandboxStarted(profile string, took time.Duration, err error)
}

// warm is one pooled sandbox, the Job it was started with, which
// nsjail.LowerFor compares a request's Job against, and the engine.Config
// it was built from, which holds its image's shared lock while it waits.
type warm struct {
	*nsjail.Sandbox
	job *nsjail.Job
	cfg *engine.Config
}

// Close destroys the sandbox, then releases its Config: after the
// sandbox, whose root is the image's tree (the lock keeps `sbx image rm`
// from removing it under a live init). The pool calls it for every
// sandbox it destroys unclaimed (Close, a shrink, a failed fit).
func (w *warm) Close() error {
	err := w.Sandbox.Close()
	w.cfg.Close()
	return err
}

// warmPool is one profile's pool, as the server keeps it.
type warmPool struct {
	spec PoolSpec
	name string // the profile's name (Spec.Profile)
	// tmpl is a Job like every one the pool starts (a Build of the same
	// profile): a request is fitted against it before a sandbox is
	// claimed, so one that cannot run pooled costs none.
	tmpl *nsjail.Job
	p    *pool.Pool[*warm]
	// unfit counts requests of the profile that ran cold because their
	// Job does not fit a pooled sandbox (LowerFor); lastUnfit says why.
	unfit     atomic.Uint64
	lastUnfit atomic.Pointer[string]
}

// pools are the server's warm pools, by profile name. They are checked
// in New (each profile builds) and started by Serve, so a server that
// never serves leaves nothing behind; Drain closes them.
type pools struct {
	byName map[string]*warmPool
	order  []*warmPool
	feed   PoolFeed
	budget pool.Budget

	mu      sync.Mutex
	started bool
	closed  bool
}

// newPools checks each --pool entry against the offered profiles and
// builds its template Job: a profile that cannot be pooled is a start-up
// error naming the flag and the profile.
func newPools(specs []PoolSpec, offered []string, budget pool.Budget, feed PoolFeed) (*pools, error) {
	ps := &pools{byName: map[string]*warmPool{}, budget: budget, feed: feed}
	for _, sp := range specs {
		if !contains(offered, sp.Profile) {
			return nil, fmt.Errorf("--pool %s=%d: profile %s is not offered (--profiles %s)", sp.Profile, sp.Min, sp.Profile, strings.Join(offered, ","))
		}
		tmpl, cfg, err := warmJob(sp.Profile)
		if err != nil {
			return nil, fmt.Errorf("--pool %s=%d: %w", sp.Profile, sp.Min, err)
		}
		// The template is data that requests are fitted against; no
		// sandbox runs on it, so its image's lock is not needed.
		cfg.Close()
		name := tmpl.Spec.Profile
		if _, dup := ps.byName[name]; dup {
			return nil, fmt.Errorf("--pool %s=%d: another pooled profile is also named %s", sp.Profile, sp.Min, name)
		}
		wp := &warmPool{spec: sp, name: name, tmpl: tmpl}
		ps.byName[name] = wp
		ps.order = append(ps.order, wp)
	}
	return ps, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// warmJob is the Job of one warm sandbox of profile ref: the Job a cold
// request of the profile without limits would run (engine.Build, the same
// code), with the interpreter and the preload started ahead (Spec.Warm)
// and a stdin pipe (a sandbox gets one only if its Job asks at Start; the
// server gives every run the request's stdin, so cold runs have one too
// and the fds match). The caller closes the Config (its image's lock)
// once no sandbox of the Job is left; on an error there is none.
func warmJob(ref string) (*nsjail.Job, *engine.Config, error) {
	cfg, err := engine.Build(newID(), engine.Request{Profile: ref})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Proxy != nil {
		cfg.Close()
		// Each run's egress proxy is started with the run and its address
		// is in the Spec: a sandbox cannot be started ahead for it.
		return nil, nil, fmt.Errorf("profile %s has network.mode \"allow\": its sandboxes need an egress proxy of their own run, so they cannot be started ahead", ref)
	}
	job := cfg.Job(nsjail.Payload{}, engine.Options{Stdin: strings.NewReader("")})
	job.Spec.Warm = cfg.Profile.Warm()
	return job, cfg, nil
}

// start starts every pool (Serve); after close it does nothing.
func (ps *pools) start(log func(string, ...any)) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.started || ps.closed {
		return
	}
	ps.started = true
	for _, wp := range ps.order {
		wp := wp
		p, err := pool.New(pool.Config[*warm]{
			Profile: wp.name,
			Min:     wp.spec.Min,
			Max:     wp.spec.Max,
			Budget:  ps.budget,
			Start: func(ctx context.Context) (*warm, error) {
				job, cfg, err := warmJob(wp.spec.Profile)
				if err != nil {
					return nil, err
				}
				// Start fills in defaults of the Job it is given (the
				// output spec): LowerFor compares the Job as it was asked
				// for, as a request's is.
				asked := *job
				sb, err := nsjail.Start(ctx, job)
				if err != nil {
					cfg.Close()
					return nil, err
				}
				return &warm{Sandbox: sb, job: &asked, cfg: cfg}, nil
			},
			OnStart: func(d time.Duration, err error) {
				if err != nil {
					log("pool %s: a warm sandbox failed to start: %v", wp.name, err)
				}
				if ps.feed != nil {
					ps.feed.SandboxStarted(wp.name, d, err)
				}
			},
		})
		if err != nil {
			// newPools checked the sizes; a failure here is a bug, and the
			// profile then runs cold.
			log("pool %s: %v", wp.name, err)
			continue
		}
		wp.p = p
	}
	if ps.feed != nil && len(ps.order) > 0 {
		go ps.feedSizes()
	}
}

// feedSizes tells the metrics the pools' sizes every second until close.
func (ps *pools) feedSizes() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range tick.C {
		ps.mu.Lock()
		closed := ps.closed
		ps.mu.Unlock()
		if closed {
			return
		}
		for _, st := range ps.stats() {
			ps.feed.PoolSize(st.Profile, st.Idle, st.Target)
		}
	}
}

// close tears every pool down: starts in flight cancelled, ready
// sandboxes destroyed. Sandboxes already claimed are their runs'.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, wp := range ps.order {
		if wp.p == nil {
			continue
		}
		wg.Add(1)
		go func(p *pool.Pool[*warm]) { defer wg.Done(); p.Close() }(wp.p)
	}
	wg.Wait()
}

// starter is the server's engine.Starter: a request whose profile has a
// pool, whose Job fits a pooled sandbox (nsjail.LowerFor, the limits it
// lowers applied at claim) and for which a sandbox is ready runs in that
// sandbox; any other runs cold (nil, nil). It never waits for a start.
func (ps *pools) starter(ctx context.Context, job *nsjail.Job) (*nsjail.Sandbox, error) {
	wp := ps.byName[job.Spec.Profile]
	if wp == nil || wp.p == nil {
		return nil, nil
	}
	if _, err := wp.fit(job); err != nil {
		wp.unfit.Add(1)
		why := err.Error()
		wp.lastUnfit.Store(&why)
		return nil, nil
	}
	w, ok := wp.p.Claim(ctx)
	if ps.feed != nil {
		ps.feed.PoolClaim(wp.name, ok)
	}
	if !ok {
		return nil, nil
	}
	// The claimed sandbox's own Job decides the Lower (it is alike the
	// template but for its id; a difference is refused all the same).
	lower, err := nsjail.LowerFor(w.job, job)
	if err != nil {
		w.Close()
		wp.unfit.Add(1)
		why := err.Error()
		wp.lastUnfit.Store(&why)
		return nil, nil
	}
	job.Payload.Lower = lower
	// The run's own Config (a Build of the same profile, closed after
	// engine.Run) holds the image's lock from here: the warm one's can go.
	w.cfg.Close()
	return w.Sandbox, nil
}

// fit says whether job can run in one of the pool's sandboxes.
func (wp *warmPool) fit(job *nsjail.Job) (*nsjail.Lower, error) {
	if job.Stdin == nil {
		// A pooled sandbox has a stdin pipe; a run without stdin reads
		// /dev/null cold, and its fd 0 must be the same.
		return nil, errors.New("the run has no stdin pipe")
	}
	if job.Payload.Lower != nil {
		return nil, errors.New("the payload already carries a Lower")
	}
	return nsjail.LowerFor(wp.tmpl, job)
}

// stats are the pools' counters.
func (ps *pools) stats() []pool.Stats {
	var out []pool.Stats
	for _, wp := range ps.order {
		if wp.p != nil {
			out = append(out, wp.p.Stats())
		}
	}
	return out
}

// PoolInfo is a profile's pool as /v1/profiles shows it.
type PoolInfo struct {
	// Min and Max are --pool's N and MAX; Target is what the pool fills
	// toward now, Idle are ready, Starting are being built.
	Min      int `json:"min"`
	Max      int `json:"max"`
	Target   int `json:"target"`
	Idle     int `json:"idle"`
	Starting int `json:"starting"`
	// Hits ran in a warm sandbox; Misses found none ready and ran cold;
	// Unfit ran cold because the request does not fit a pooled sandbox
	// (a lowered workspace size, output cap or CPUs...), LastUnfit says
	// why.
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Unfit     uint64 `json:"unfit"`
	LastUnfit string `json:"last_unfit,omitempty"`
	// Started and StartFailures count the sandboxes built and those that
	// failed; LastError is the latest failure ("" after a success).
	Started       uint64 `json:"started"`
	StartFailures uint64 `json:"start_failures"`
	LastError     string `json:"last_error,omitempty"`
	// DiedIdle are ready sandboxes that ended before a request came.
	DiedIdle uint64 `json:"died_idle"`
}

// info is ref's pool, nil without one.
func (ps *pools) info(ref string) *PoolInfo {
	for _, wp := range ps.order {
		if wp.spec.Profile != ref {
			continue
		}
		in := &PoolInfo{Min: wp.spec.Min, Max: wp.spec.Max, Unfit: wp.unfit.Load()}
		if why := wp.lastUnfit.Load(); why != nil {
			in.LastUnfit = *why
		}
		if wp.p != nil {
			st := wp.p.Stats()
			in.Target, in.Idle, in.Starting = st.Target, st.Idle, st.Starting
			in.Hits, in.Misses, in.Started, in.StartFailures = st.Hits, st.Misses, st.Started, st.StartFailures
			in.LastError, in.DiedIdle = st.LastError, st.DiedIdle
		}
		return in
	}
	return nil
}

// broken names a pool that cannot build sandboxes: its latest start
// failed and none is ready (/readyz says 503: the host is not fit to run
// the profile, cold or warm).
func (ps *pools) broken() string {
	for _, st := range ps.stats() {
		if st.LastError != "" && st.Idle == 0 {
			return fmt.Sprintf("pool %s cannot build sandboxes: %s", st.Profile, st.LastError)
		}
	}
	return ""
}

// PoolStats are the counters of every warm pool (plain data: idle,
// target, hits, misses, starts, failures), for the metrics.
func (s *Server) PoolStats() []pool.Stats { return s.pools.stats() }

// startBudget is the pools' pool.Budget: a start takes one of the
// workers --max-concurrent counts, as a run does, so that the pools
// refill within it and never crowd out the runs beyond it.
type startBudget struct{ a *admission }

func (b startBudget) Acquire(ctx context.Context) error {
	select {
	case b.a.slots <- struct{}{}:
		b.a.starts.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b startBudget) Release() {
	b.a.starts.Add(-1)
	<-b.a.slots
}
