package serve

import (
	"fmt"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// BreakerConfig is the circuit breaker per token: Kills runs of one token
// ended by a limit (memory, pids, CPU time) within Window open its
// breaker, and the token's new runs get 429 for Cooldown. A client that
// keeps sending fork or memory bombs then costs the host one cheap 429
// each, not a sandbox each, and the other tokens keep their workers.
type BreakerConfig struct {
	// Kills is how many limit kills open the breaker; 0 is the default,
	// negative turns the breaker off.
	Kills    int
	Window   time.Duration
	Cooldown time.Duration
}

// Defaults of the breaker: five bombs a minute throttle a token for a
// minute.
const (
	DefaultBreakerKills    = 5
	DefaultBreakerWindow   = time.Minute
	DefaultBreakerCooldown = time.Minute
)

// tripsBreaker says whether a status counts towards a token's breaker:
// the limits that cost the host the most to enforce. A wall timeout or an
// output cap is a payload's own business (a sleep costs nothing).
func tripsBreaker(st nsjail.Status) bool {
	switch st {
	case nsjail.StatusMemoryLimit, nsjail.StatusPidsLimit, nsjail.StatusCPULimit:
		return true
	}
	return false
}

// breaker holds one state per token name. Its memory is bounded: token
// names come from --token-file (one "" without tokens), and each state
// keeps at most Kills times.
type breaker struct {
	cfg   BreakerConfig
	now   func() time.Time
	trips func()

	mu     sync.Mutex
	tokens map[string]*tokenState
}

type tokenState struct {
	kills []time.Time // within the window, oldest first; at most cfg.Kills
	until time.Time   // throttled until then
}

func newBreaker(cfg BreakerConfig, trips func()) *breaker {
	if cfg.Kills == 0 {
		cfg.Kills = DefaultBreakerKills
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultBreakerWindow
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultBreakerCooldown
	}
	return &breaker{cfg: cfg, now: time.Now, trips: trips, tokens: map[string]*tokenState{}}
}

// throttledError is the 429 of an open breaker: it says why and for how
// long.
type throttledError struct {
	kills          int
	window, retry  time.Duration
	cooldown       time.Duration
	limitsStatuses string
}

func (e *throttledError) Error() string {
	return fmt.Sprintf("this token is throttled: %d of its runs were killed by a limit (%s) within %v, so its new runs are refused for %v; retry in %v",
		e.kills, e.limitsStatuses, e.window, e.cooldown, e.retry.Round(time.Second))
}

// check says whether token may run now; an error says for how long not.
func (b *breaker) check(token string) *throttledError {
	if b.cfg.Kills < 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.tokens[token]
	if st == nil {
		return nil
	}
	if left := st.until.Sub(b.now()); left > 0 {
		return &throttledError{kills: b.cfg.Kills, window: b.cfg.Window, cooldown: b.cfg.Cooldown, retry: left, limitsStatuses: "memory_limit, pids_limit or cpu_limit"}
	}
	return nil
}

// record counts one finished run of token.
func (b *breaker) record(token string, st nsjail.Status) {
	if b.cfg.Kills < 0 || !tripsBreaker(st) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.tokens[token]
	if s == nil {
		s = &tokenState{}
		b.tokens[token] = s
	}
	now := b.now()
	if now.Before(s.until) {
		// A run admitted before the breaker opened: it is already paid for.
		return
	}
	keep := s.kills[:0]
	for _, t := range s.kills {
		if now.Sub(t) < b.cfg.Window {
			keep = append(keep, t)
		}
	}
	s.kills = append(keep, now)
	if len(s.kills) >= b.cfg.Kills {
		s.kills = s.kills[:0]
		s.until = now.Add(b.cfg.Cooldown)
		if b.trips != nil {
			b.trips()
		}
	}
}

// open is how many tokens are throttled now (sbx_breaker_open).
func (b *breaker) open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	now := b.now()
	for _, s := range b.tokens {
		if now.Before(s.until) {
			n++
		}
	}
	return n
}
