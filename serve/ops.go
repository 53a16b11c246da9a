package serve

import (
	"net/http"
	"strconv"
	"time"
)

// ops is what the server adds around its runs for operations: metrics,
// the circuit breaker per token, the async jobs and the OpenAPI document.
// It hooks into the exec handler at two points only: throttled (before
// admission) and finished (after each run).
type ops struct {
	metrics *Metrics
	breaker *breaker
	jobs    *jobStore
}

// enableOps builds ops and registers its endpoints.
func (s *Server) enableOps() {
	o := &ops{jobs: newJobStore(s.cfg.Jobs)}
	o.breaker = newBreaker(s.cfg.Breaker, nil)
	o.metrics = newMetrics(gauges{
		running:   s.adm.running,
		waiting:   s.adm.waiting,
		throttled: o.breaker.open,
		jobs:      o.jobs.count,
		// Read at scrape time: registerSessions sets s.sess after this.
		sessions: func() int { return s.sess.active() },
	})
	o.breaker.trips = o.metrics.breakerTrips.Inc
	s.ops = o
	// /metrics asks for the token like the API (a scraper sends it as
	// bearer_token): the load and limit kills of a host are not public.
	s.Handle("GET /metrics", true, o.metrics.handler())
	s.Handle("POST /v1/jobs", true, http.HandlerFunc(s.postJob))
	s.Handle("GET /v1/jobs/{id}", true, http.HandlerFunc(s.getJob))
	s.Handle("GET /v1/jobs/{id}/events", true, http.HandlerFunc(s.jobEvents))
	s.Handle("DELETE /v1/jobs/{id}", true, http.HandlerFunc(s.deleteJob))
	s.Handle("GET /v1/openapi.json", false, http.HandlerFunc(serveOpenAPI))
}

// Metrics are the server's metrics; Metrics().Pool() is what a warm pool
// feeds.
func (s *Server) Metrics() *Metrics { return s.ops.metrics }

// finished is called with each finished run, sync or async: metrics, the
// breaker, then Config.OnResult.
func (s *Server) finished(f Finished) {
	s.ops.metrics.observe(f)
	s.ops.breaker.record(f.Token, f.Result.Status)
	if s.cfg.OnResult != nil {
		s.cfg.OnResult(f)
	}
}

// throttled answers 429 when token's circuit breaker is open, saying why
// and for how long (Retry-After, in whole seconds, rounded up).
func (s *Server) throttled(w http.ResponseWriter, token string) bool {
	e := s.ops.breaker.check(token)
	if e == nil {
		return false
	}
	s.ops.metrics.reject(rejectThrottled)
	w.Header().Set("Retry-After", strconv.Itoa(int((e.retry+time.Second-1)/time.Second)))
	writeError(w, http.StatusTooManyRequests, "throttled", e.Error())
	return true
}

// rejectedBusy counts a 429 of a full admission.
func (s *Server) rejectedBusy() { s.ops.metrics.reject(rejectBusy) }
