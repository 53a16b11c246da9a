package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is a sandbox without a sandbox: Done closes when it dies or is
// closed.
type fake struct {
	done     chan struct{}
	once     sync.Once
	closed   atomic.Bool
	starters *fakes
}

func (f *fake) Done() <-chan struct{} { return f.done }
func (f *fake) Close() error {
	f.closed.Store(true)
	f.die()
	return nil
}
func (f *fake) die() { f.once.Do(func() { close(f.done) }) }

// fakes starts fakes, after delay, failing while fail is set, and
// records how many starts ran at once.
type fakes struct {
	mu       sync.Mutex
	all      []*fake
	delay    time.Duration
	fail     atomic.Bool
	running  atomic.Int32
	peak     atomic.Int32
	attempts atomic.Int32
}

func (fs *fakes) start(ctx context.Context) (*fake, error) {
	fs.attempts.Add(1)
	n := fs.running.Add(1)
	defer fs.running.Add(-1)
	for {
		p := fs.peak.Load()
		if n <= p || fs.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-time.After(fs.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if fs.fail.Load() {
		return nil, errors.New("no sandbox here")
	}
	f := &fake{done: make(chan struct{}), starters: fs}
	fs.mu.Lock()
	fs.all = append(fs.all, f)
	fs.mu.Unlock()
	return f, nil
}

func (fs *fakes) allClosed(t *testing.T) {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.all {
		if !f.closed.Load() {
			t.Errorf("sandbox %d of %d was never closed", i, len(fs.all))
		}
	}
}

// eventually waits for cond, generously: the machine is loaded.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newPool(t *testing.T, fs *fakes, cfg Config[*fake]) *Pool[*fake] {
	t.Helper()
	cfg.Start = fs.start
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFillClaimReplace: the pool fills to Min; each claim hands out a
// ready sandbox once, never twice, and a replacement follows.
func TestFillClaimReplace(t *testing.T) {
	fs := &fakes{delay: time.Millisecond}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 3, Budget: NewBudget(2)})
	eventually(t, "3 idle", func() bool { return p.Stats().Idle == 3 })
	seen := map[*fake]bool{}
	for i := 0; i < 10; i++ {
		eventually(t, "one idle", func() bool { return p.Stats().Idle > 0 })
		sb, ok := p.Claim(context.Background())
		if !ok {
			t.Fatal("a miss with sandboxes idle")
		}
		if seen[sb] {
			t.Fatal("a sandbox handed out twice")
		}
		seen[sb] = true
		sb.Close()
	}
	eventually(t, "refilled to 3", func() bool { return p.Stats().Idle == 3 })
	st := p.Stats()
	if st.Hits != 10 || st.Misses != 0 || st.Started < 13 {
		t.Errorf("stats %+v", st)
	}
	p.Close()
	fs.allClosed(t)
	if st := p.Stats(); st.Idle != 0 {
		t.Errorf("after Close: %+v", st)
	}
}

// missesToMax claims six times from an empty pool: each claim must be a
// miss at once (never a wait for a start), and the misses grow the
// target to Max (4). The pool's starts take startDelay, long enough that
// none is ready before the claims are done, even on a loaded machine.
const startDelay = 300 * time.Millisecond

func missesToMax(t *testing.T, p *Pool[*fake]) {
	t.Helper()
	for i := 0; i < 6; i++ {
		t0 := time.Now()
		if sb, ok := p.Claim(context.Background()); ok {
			sb.Close()
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("Claim took %v: it must never wait for a start", d)
		}
	}
	if st := p.Stats(); st.Target != 4 || st.Misses == 0 {
		t.Errorf("after misses: %+v, want target 4", st)
	}
}

// TestMissGrow: an empty pool's claim is a miss at once, and misses grow
// the target toward Max, which the pool then fills. IdleAfter is an hour
// so that no shrink can race the fill: with a short one, a loaded CI
// machine once took longer than IdleAfter to fill, and the pool shrank
// before 4 were ever idle together.
func TestMissGrow(t *testing.T) {
	fs := &fakes{delay: startDelay}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 1, Max: 4, Budget: NewBudget(4), IdleAfter: time.Hour})
	defer p.Close()
	missesToMax(t, p)
	eventually(t, "4 idle", func() bool { return p.Stats().Idle == 4 })
	if st := p.Stats(); st.Target != 4 {
		t.Errorf("shrank within IdleAfter (an hour): %+v", st)
	}
	p.Close()
	fs.allClosed(t)
}

// TestIdleShrink: after misses grew the target to Max, idleness shrinks
// it back to Min, closing the sandboxes it no longer wants.
func TestIdleShrink(t *testing.T) {
	fs := &fakes{delay: startDelay}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 1, Max: 4, Budget: NewBudget(4), IdleAfter: 300 * time.Millisecond})
	defer p.Close()
	missesToMax(t, p)
	eventually(t, "shrunk to 1", func() bool { st := p.Stats(); return st.Target == 1 && st.Idle == 1 })
	p.Close()
	fs.allClosed(t)
}

// TestDeadPool: a pool whose starts fail reports misses at once and backs
// off instead of spinning; it recovers once starts work.
func TestDeadPool(t *testing.T) {
	fs := &fakes{}
	fs.fail.Store(true)
	var observed atomic.Int32
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 2, OnStart: func(d time.Duration, err error) {
		if err != nil {
			observed.Add(1)
		}
	}})
	defer p.Close()
	time.Sleep(1500 * time.Millisecond)
	t0 := time.Now()
	if _, ok := p.Claim(context.Background()); ok {
		t.Fatal("a hit from a pool that cannot start")
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Claim on a dead pool took %v", d)
	}
	// 100 ms doubling: about 4 attempts in 1.5 s, never hundreds.
	if n := fs.attempts.Load(); n > 8 || n < 1 {
		t.Errorf("%d start attempts in 1.5 s: want a back-off", n)
	}
	if st := p.Stats(); st.StartFailures == 0 || st.LastError == "" {
		t.Errorf("stats %+v", st)
	}
	fs.fail.Store(false)
	eventually(t, "recovered", func() bool { return p.Stats().Idle == 2 })
	if st := p.Stats(); st.LastError != "" {
		t.Errorf("after recovery: %+v", st)
	}
	p.Close()
	// Once Close has waited for every start: OnStart runs before the
	// count is taken, so a start in flight could show one apart earlier.
	if st := p.Stats(); int32(st.StartFailures) != observed.Load() {
		t.Errorf("stats count %d failures, OnStart saw %d", st.StartFailures, observed.Load())
	}
	fs.allClosed(t)
}

// TestBudget: starts never exceed the budget, which pools share.
func TestBudget(t *testing.T) {
	fs := &fakes{delay: 30 * time.Millisecond}
	b := NewBudget(2)
	p1 := newPool(t, fs, Config[*fake]{Profile: "a", Min: 5, Budget: b})
	p2 := newPool(t, fs, Config[*fake]{Profile: "b", Min: 5, Budget: b})
	set := Set[*fake]{"a": p1, "b": p2}
	eventually(t, "both full", func() bool { return p1.Stats().Idle == 5 && p2.Stats().Idle == 5 })
	if pk := fs.peak.Load(); pk > 2 {
		t.Errorf("%d starts at once, budget 2", pk)
	}
	claimed, ok := set.Claim(context.Background(), "a")
	if !ok {
		t.Fatal("Set.Claim a: miss")
	}
	if _, ok := set.Claim(context.Background(), "nope"); ok {
		t.Error("Set.Claim of a profile without a pool: hit")
	}
	if len(set.Stats()) != 2 {
		t.Error("Set.Stats")
	}
	set.Close()
	if claimed.closed.Load() {
		t.Error("Close closed a claimed sandbox: it is its caller's")
	}
	claimed.Close()
	fs.allClosed(t)
}

// TestDiedIdle: a ready sandbox that dies while it waits is dropped,
// never handed out, and replaced.
func TestDiedIdle(t *testing.T) {
	fs := &fakes{delay: time.Millisecond}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 2})
	defer p.Close()
	eventually(t, "2 idle", func() bool { return p.Stats().Idle == 2 })
	fs.mu.Lock()
	victim := fs.all[0]
	fs.mu.Unlock()
	victim.die()
	eventually(t, "dropped and replaced", func() bool { st := p.Stats(); return st.DiedIdle == 1 && st.Idle == 2 })
	for i := 0; i < 2; i++ {
		sb, ok := p.Claim(context.Background())
		if !ok || sb == victim {
			t.Fatalf("claim %d: %v %v", i, ok, sb == victim)
		}
		sb.Close()
	}
	p.Close()
	fs.allClosed(t)
}

// TestCloseCancelsStarts: Close cancels a start in flight and returns;
// a claim afterwards is a miss.
func TestCloseCancelsStarts(t *testing.T) {
	fs := &fakes{delay: time.Hour}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 1})
	eventually(t, "a start in flight", func() bool { return fs.running.Load() == 1 })
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a start")
	}
	if _, ok := p.Claim(context.Background()); ok {
		t.Error("a hit after Close")
	}
	if st := p.Stats(); st.StartFailures != 0 {
		t.Errorf("a cancelled start counted as a failure: %+v", st)
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(Config[*fake]{Min: 2, Max: 1, Start: (&fakes{}).start}); err == nil {
		t.Error("max below min accepted")
	}
	if _, err := New(Config[*fake]{Min: 1}); err == nil {
		t.Error("no Start accepted")
	}
}

// TestRefillWaitsForClaimedRun: the replacement of a claimed sandbox
// starts once its run has ended (Done), not at claim, where it would
// compete for the CPUs with the run the client waits for; a run that
// goes on past RefillAfter holds it back no longer than that, and a
// claim that leaves none ready is not held back at all.
func TestRefillWaitsForClaimedRun(t *testing.T) {
	fs := &fakes{delay: time.Millisecond}
	p := newPool(t, fs, Config[*fake]{Profile: "x", Min: 2, RefillAfter: time.Hour})
	eventually(t, "2 idle", func() bool { return p.Stats().Idle == 2 })
	sb, ok := p.Claim(context.Background())
	if !ok {
		t.Fatal("a miss with a sandbox idle")
	}
	// The manager wakes at the claim and on its tick (a second): give it
	// both before checking that nothing started.
	time.Sleep(1500 * time.Millisecond)
	if n := fs.attempts.Load(); n != 2 {
		t.Fatalf("%d starts while the claimed sandbox runs: want the refill to wait for its end", n)
	}
	// A claim that leaves none ready refills at once, as does the one
	// held back until then: the next request would miss.
	sb2, ok := p.Claim(context.Background())
	if !ok {
		t.Fatal("a miss with a sandbox idle")
	}
	eventually(t, "refilled at once when none is left ready", func() bool { return p.Stats().Idle == 2 })
	sb.Close()
	sb2.Close()
	p.Close()
	fs.allClosed(t)

	fs = &fakes{delay: time.Millisecond}
	p = newPool(t, fs, Config[*fake]{Profile: "x", Min: 1, RefillAfter: 50 * time.Millisecond})
	eventually(t, "1 idle", func() bool { return p.Stats().Idle == 1 })
	long, ok := p.Claim(context.Background())
	if !ok {
		t.Fatal("a miss with a sandbox idle")
	}
	eventually(t, "refilled while a long run goes on", func() bool { return p.Stats().Idle == 1 })
	p.Close()
	long.Close()
	fs.allClosed(t)
}
