package serve

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sbx-sandbox/sbx/internal/version"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// Metrics are the server's Prometheus metrics, in a registry of their own
// (never the global one, so that two Servers in one test process do not
// collide). Names follow the Prometheus conventions with the sbx_ prefix;
// no label carries an id (request, run, job or token): every label's
// values are a small fixed set (statuses, limits, decisions) or the
// profiles the server offers, which --profiles bounds.
//
// The pool-fed ones (sbx_pool_idle, sbx_pool_target, sbx_pool_claims_total,
// sbx_sandbox_start_duration_seconds, sbx_sandbox_start_failures_total)
// move only when a warm pool calls Pool()'s PoolObserver.
type Metrics struct {
	reg *prometheus.Registry

	execTotal      *prometheus.CounterVec
	execDuration   *prometheus.HistogramVec
	queueWait      prometheus.Histogram
	rejected       *prometheus.CounterVec
	limitKills     *prometheus.CounterVec
	seccompDenials prometheus.Counter
	egress         *prometheus.CounterVec
	memPeakRatio   prometheus.Histogram
	breakerTrips   prometheus.Counter

	poolIdle      *prometheus.GaugeVec
	poolTarget    *prometheus.GaugeVec
	poolClaims    *prometheus.CounterVec
	startDuration prometheus.Histogram
	startFailures prometheus.Counter

	sessionExecs *prometheus.CounterVec
	sessionEnds  *prometheus.CounterVec
}

// gauges are the values read at scrape time from the server's state.
type gauges struct {
	running, waiting, throttled, jobs, sessions func() int
}

// Rejection reasons, the values of sbx_exec_rejected_total's reason.
type rejectReason string

const (
	rejectBusy      rejectReason = "busy"      // --max-concurrent and --queue full: 429
	rejectThrottled rejectReason = "throttled" // the token's circuit breaker is open: 429
	rejectDraining  rejectReason = "draining"  // SIGTERM: 503
)

// limitOf is the limit a status says killed the run, for
// sbx_limit_kills_total{limit}; "" for a status that is no limit kill.
func limitOf(st nsjail.Status) string {
	switch st {
	case nsjail.StatusMemoryLimit:
		return "memory"
	case nsjail.StatusPidsLimit:
		return "pids"
	case nsjail.StatusCPULimit:
		return "cpu_time"
	case nsjail.StatusTimeout:
		return "wall_time"
	case nsjail.StatusOutputLimit:
		return "output"
	}
	return ""
}

func newMetrics(g gauges) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	// Run durations go from a few ms (a warm print(1)) to the longest
	// wall limit a profile sets (minutes): 5 ms doubling to ~10 min.
	runBuckets := prometheus.ExponentialBuckets(0.005, 2, 18)
	m.execTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_exec_total", Help: "Runs finished, by profile and Result status (sync and async).",
	}, []string{"profile", "status"})
	m.execDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sbx_exec_duration_seconds", Help: "Wall time of each run (the Result's usage.wall_ms), by profile.", Buckets: runBuckets,
	}, []string{"profile"})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sbx_exec_queue_wait_seconds", Help: "Time an admitted run waited for a worker (--max-concurrent).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
	})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_exec_rejected_total", Help: "Requests refused before running: busy (429), throttled by the token's circuit breaker (429), draining (503).",
	}, []string{"reason"})
	m.limitKills = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_limit_kills_total", Help: "Runs ended by a limit: memory, pids, cpu_time, wall_time, output.",
	}, []string{"limit"})
	m.seccompDenials = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sbx_seccomp_denials_total", Help: "Syscalls the seccomp filter refused, summed over runs (the Result's seccomp_denials counts).",
	})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_egress_attempts_total", Help: "Connection attempts through the egress proxy, by decision: allowed, refused, rate_limited (network_summary).",
	}, []string{"decision"})
	m.memPeakRatio = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sbx_memory_peak_ratio", Help: "Each run's peak memory over its memory limit (runs that report both); alert near 1.",
		Buckets: []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1},
	})
	m.breakerTrips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sbx_breaker_trips_total", Help: "Times a token's circuit breaker opened: repeated limit kills within the window throttle it for the cool-down.",
	})
	m.poolIdle = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sbx_pool_idle", Help: "Warm sandboxes ready to be claimed, by profile (fed by the pool).",
	}, []string{"profile"})
	m.poolTarget = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sbx_pool_target", Help: "Warm sandboxes the pool aims to keep ready, by profile (fed by the pool).",
	}, []string{"profile"})
	m.poolClaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_pool_claims_total", Help: "Claims on the warm pool, by profile and result: hit (a warm sandbox) or miss (ran cold) (fed by the pool).",
	}, []string{"profile", "result"})
	m.startDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sbx_sandbox_start_duration_seconds", Help: "Time to build one warm sandbox up to ready (fed by the pool).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	m.startFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sbx_sandbox_start_failures_total", Help: "Warm sandboxes that failed to start (fed by the pool).",
	})
	// The session code feeds these (sessionExecuted, sessionEnded); the
	// labels are the fixed sets nsjail.ExecStatus and SessionEndReason.
	m.sessionExecs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_session_executions_total", Help: "Cells run in sessions, by the Execution's status.",
	}, []string{"status"})
	m.sessionEnds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sbx_session_ends_total", Help: "Sessions ended, by why: deleted, ttl, idle, died (its sandbox ended on its own), drain.",
	}, []string{"reason"})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sbx_build_info", Help: "Always 1; the labels say which sbx serves.",
	}, []string{"version", "commit", "goversion"})
	buildInfo.WithLabelValues(version.Version(), version.Commit(), runtime.Version()).Set(1)
	gauge := func(name, help string, f func() int) prometheus.Collector {
		if f == nil { // a gauges without it (a unit test): always 0
			f = func() int { return 0 }
		}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	m.reg.MustRegister(
		m.execTotal, m.execDuration, m.queueWait, m.rejected, m.limitKills, m.seccompDenials, m.egress, m.memPeakRatio, m.breakerTrips,
		m.poolIdle, m.poolTarget, m.poolClaims, m.startDuration, m.startFailures, buildInfo,
		m.sessionExecs, m.sessionEnds,
		gauge("sbx_sessions_active", "Sessions open now.", g.sessions),
		gauge("sbx_exec_running", "Runs holding a worker now.", g.running),
		gauge("sbx_queue_depth", "Admitted runs waiting for a worker now.", g.waiting),
		gauge("sbx_breaker_open", "Tokens throttled by their circuit breaker now.", g.throttled),
		gauge("sbx_jobs_stored", "Async jobs the server holds now (queued, running, or finished within the TTL).", g.jobs),
		// go_goroutines, go_memstats_*, process_open_fds and
		// process_resident_memory_bytes are what the soak test reads.
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observe counts one finished run.
func (m *Metrics) observe(f Finished) {
	res := f.Result
	m.execTotal.WithLabelValues(f.Profile, string(res.Status)).Inc()
	m.execDuration.WithLabelValues(f.Profile).Observe(float64(res.Usage.WallMS) / 1e3)
	m.queueWait.Observe(f.QueueWait.Seconds())
	if l := limitOf(res.Status); l != "" {
		m.limitKills.WithLabelValues(l).Inc()
	}
	n := 0
	for _, d := range res.SeccompDenials {
		n += d.Count
	}
	m.seccompDenials.Add(float64(n))
	if s := res.NetworkSummary; s != nil {
		m.countEgress(s)
	}
	if lim, ok := res.Limits["memory"]; ok && lim.Value > 0 && res.Usage.PeakMemoryBytes > 0 {
		m.memPeakRatio.Observe(float64(res.Usage.PeakMemoryBytes) / lim.Value)
	}
}

func (m *Metrics) reject(why rejectReason) { m.rejected.WithLabelValues(string(why)).Inc() }

// countEgress counts a run's, or a session cell's, egress attempts by
// decision.
func (m *Metrics) countEgress(s *nsjail.Summary) {
	m.egress.WithLabelValues("allowed").Add(float64(max(0, s.Attempts-s.Refused-s.RateLimited)))
	m.egress.WithLabelValues("refused").Add(float64(s.Refused))
	m.egress.WithLabelValues("rate_limited").Add(float64(s.RateLimited))
}

// sessionExecuted counts one cell a session ran, by its status.
func (m *Metrics) sessionExecuted(st nsjail.ExecStatus) {
	m.sessionExecs.WithLabelValues(string(st)).Inc()
}

// sessionEnded counts one session ended, by why.
func (m *Metrics) sessionEnded(why SessionEndReason) {
	m.sessionEnds.WithLabelValues(string(why)).Inc()
}

// handler serves the registry in the text exposition format.
func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// PoolObserver is what a warm pool feeds the server's sbx_pool_* and
// sbx_sandbox_start_* metrics with. Profile is the profile's name as the
// Result's profile field says it. The pool package may declare the same
// method set as its own interface, so that it need not import serve.
type PoolObserver interface {
	// PoolSize says how many sandboxes of profile are ready (idle) and
	// how many the pool aims at now (target); call it when either moves.
	PoolSize(profile string, idle, target int)
	// PoolClaim counts one claim: hit, a warm sandbox was handed out;
	// miss, none was ready and the run went cold.
	PoolClaim(profile string, hit bool)
	// SandboxStarted counts one warm sandbox built (err nil) or failed
	// (err set), and how long it took.
	SandboxStarted(profile string, took time.Duration, err error)
}

// Pool is the PoolObserver the lead wires a warm pool to.
func (m *Metrics) Pool() PoolObserver { return poolMetrics{m} }

type poolMetrics struct{ m *Metrics }

func (p poolMetrics) PoolSize(profile string, idle, target int) {
	p.m.poolIdle.WithLabelValues(profile).Set(float64(idle))
	p.m.poolTarget.WithLabelValues(profile).Set(float64(target))
}

func (p poolMetrics) PoolClaim(profile string, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	p.m.poolClaims.WithLabelValues(profile, result).Inc()
}

func (p poolMetrics) SandboxStarted(profile string, took time.Duration, err error) {
	if err != nil {
		p.m.startFailures.Inc()
		return
	}
	p.m.startDuration.Observe(took.Seconds())
}
