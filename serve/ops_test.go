package serve

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	dto "github.com/prometheus/client_model/go"

	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// clock is a settable time for the breaker and the job store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBreaker(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	trips := 0
	b := newBreaker(BreakerConfig{Kills: 3, Window: time.Minute, Cooldown: 30 * time.Second}, func() { trips++ })
	b.now = c.now
	steps := []struct {
		name    string
		advance time.Duration
		token   string
		status  nsjail.Status
		want    bool // throttled after the step
	}{
		{"one kill", 0, "a", nsjail.StatusMemoryLimit, false},
		{"a timeout does not count", time.Second, "a", nsjail.StatusTimeout, false},
		{"an ok run does not count", time.Second, "a", nsjail.StatusOK, false},
		{"two kills", time.Second, "a", nsjail.StatusPidsLimit, false},
		{"the first leaves the window", 57 * time.Second, "a", nsjail.StatusCPULimit, false},
		{"another token is apart", time.Second, "b", nsjail.StatusMemoryLimit, false},
		{"three in the window open it", time.Second, "a", nsjail.StatusMemoryLimit, true},
		{"still in the cool-down", 29 * time.Second, "b", nsjail.StatusOK, true},
		{"the cool-down ends", 2 * time.Second, "b", nsjail.StatusOK, false},
	}
	for _, s := range steps {
		c.t = c.t.Add(s.advance)
		b.record(s.token, s.status)
		if got := b.check("a") != nil; got != s.want {
			t.Fatalf("%s: token a throttled %v, want %v", s.name, got, s.want)
		}
		if b.check("b") != nil {
			t.Fatalf("%s: token b throttled", s.name)
		}
	}
	if trips != 1 {
		t.Errorf("trips %d, want 1", trips)
	}
	off := newBreaker(BreakerConfig{Kills: -1}, nil)
	for range 10 {
		off.record("a", nsjail.StatusMemoryLimit)
	}
	if off.check("a") != nil {
		t.Error("a breaker with Kills -1 throttled")
	}
}

func TestThrottledMessage(t *testing.T) {
	e := &throttledError{kills: 5, window: time.Minute, cooldown: time.Minute, retry: 42 * time.Second, limitsStatuses: "memory_limit"}
	for _, want := range []string{"throttled", "5 of its runs", "within 1m0s", "retry in 42s"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%q lacks %q", e.Error(), want)
		}
	}
}

func finishedJob(id string, at time.Time, size int) *job {
	return &job{id: id, state: JobDone, finishedAt: at, events: [][]byte{make([]byte, size)}, size: int64(size), changed: make(chan struct{})}
}

func TestJobStoreBounds(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	st := newJobStore(JobsConfig{TTL: time.Minute, MaxJobs: 3, MaxBytes: 1000})
	st.now = c.now
	add := func(j *job) {
		t.Helper()
		if err := st.add(j, 10); err != nil {
			t.Fatal(err)
		}
		if j.state.finished() {
			st.finished(j)
		}
	}
	add(finishedJob("a", c.t, 100))
	add(finishedJob("b", c.t.Add(time.Second), 100))
	add(finishedJob("c", c.t.Add(2*time.Second), 100))
	// The count cap drops the oldest finished.
	add(finishedJob("d", c.t.Add(3*time.Second), 100))
	if got := strings.Join(st.jobIDs(), ","); got != "b,c,d" {
		t.Fatalf("after the count cap: %s, want b,c,d", got)
	}
	// The byte cap drops the oldest until it holds.
	add(finishedJob("e", c.t.Add(4*time.Second), 850))
	if got := strings.Join(st.jobIDs(), ","); got != "d,e" || st.held != 950 {
		t.Fatalf("after the byte cap: %s (%d bytes), want d,e (950)", got, st.held)
	}
	// One job past the byte cap alone is not kept.
	add(finishedJob("f", c.t.Add(5*time.Second), 2000))
	if got := strings.Join(st.jobIDs(), ","); got != "" || st.held != 0 {
		t.Fatalf("after a job past the cap: %q (%d bytes), want none", got, st.held)
	}
	// Unfinished jobs are never dropped, and are bounded by admission.
	for _, id := range []string{"q1", "q2"} {
		if err := st.add(&job{id: id, state: JobQueued, changed: make(chan struct{})}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.add(&job{id: "q3", state: JobQueued, changed: make(chan struct{})}, 2); err != errFull {
		t.Fatalf("a third unfinished job past 2 places: %v, want errFull", err)
	}
	// The TTL removes finished jobs, not unfinished ones.
	add(finishedJob("g", c.t.Add(6*time.Second), 10))
	c.t = c.t.Add(6*time.Second + time.Minute + time.Second)
	if st.get("g", "") != nil {
		t.Fatal("job g outlived its TTL")
	}
	if st.get("q1", "") == nil {
		t.Fatal("unfinished job q1 was swept")
	}
	if st.get("q1", "other token") != nil {
		t.Fatal("another token sees job q1")
	}
}

func TestJobWriterEvents(t *testing.T) {
	j := &job{id: "x", state: JobQueued, changed: make(chan struct{})}
	w := &jobWriter{j: j, max: 100, header: http.Header{}}
	w.WriteHeader(http.StatusOK)
	if j.state != JobRunning {
		t.Fatalf("state %s after 200, want running", j.state)
	}
	line := func(e Event) []byte { b, _ := json.Marshal(e); return append(b, '\n') }
	out := line(Event{Type: "stdout", Data: strings.Repeat("x", 40)})
	// A line split over two writes is kept whole.
	w.Write(out[:10])
	w.Write(out[10:])
	w.Write(line(Event{Type: "stderr", Data: strings.Repeat("y", 40)}))
	w.Write(line(Event{Type: "stdout", Data: "z"}))
	w.Write(line(Event{Type: "result", Result: &ExecResponse{Result: &nsjail.Result{Status: nsjail.StatusOK}, RequestID: "x"}}))
	var types []string
	for _, l := range j.events {
		var e struct{ Type string }
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("event %q: %v", l, err)
		}
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "stdout,truncated,result" {
		t.Fatalf("events %s, want stdout,truncated,result", got)
	}
	if j.dropped == 0 || j.result == nil {
		t.Fatalf("dropped %d, result %s", j.dropped, j.result)
	}
	// A run that answers an error before running keeps its body, bounded.
	f := &job{id: "y", state: JobQueued, changed: make(chan struct{})}
	fw := &jobWriter{j: f, max: 100, header: http.Header{}}
	fw.WriteHeader(http.StatusTooManyRequests)
	fw.Write([]byte(strings.Repeat("e", maxErrorBody+10)))
	if f.state != JobQueued || len(f.errBody) != maxErrorBody || len(f.events) != 0 {
		t.Fatalf("error answer: state %s, %d bytes kept, %d events", f.state, len(f.errBody), len(f.events))
	}
}

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func TestMetricsObserve(t *testing.T) {
	m := newMetrics(gauges{running: func() int { return 2 }, waiting: func() int { return 1 }, throttled: func() int { return 0 }, jobs: func() int { return 0 }})
	res := &nsjail.Result{Status: nsjail.StatusMemoryLimit, Usage: nsjail.Usage{WallMS: 1500, PeakMemoryBytes: 96 << 20},
		Limits:         map[string]nsjail.LimitInfo{"memory": {Value: 128 << 20, Unit: "bytes"}},
		SeccompDenials: []nsjail.Denial{{Syscall: "ptrace", Count: 3}, {Syscall: "bpf", Count: 2}}}
	res.NetworkSummary = &netproxy.Summary{Attempts: 10, Recorded: 7, Refused: 3, RateLimited: 2}
	m.observe(Finished{Profile: "standard", Result: res, QueueWait: 250 * time.Millisecond})
	m.Pool().PoolClaim("standard", true)
	m.Pool().PoolSize("data", 3, 4)
	fams := gather(t, m)
	want := map[string]float64{
		"sbx_exec_total":            1,
		"sbx_limit_kills_total":     1,
		"sbx_seccomp_denials_total": 5,
		"sbx_exec_running":          2,
		"sbx_queue_depth":           1,
		"sbx_pool_claims_total":     1,
		"sbx_pool_idle":             3,
		"sbx_pool_target":           4,
		"sbx_build_info":            1,
	}
	for name, v := range want {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Errorf("%s: %v", name, f)
			continue
		}
		mt := f.Metric[0]
		got := mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if h := fams["sbx_memory_peak_ratio"].Metric[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.75 {
		t.Errorf("sbx_memory_peak_ratio: %d samples summing %v, want 1, 0.75", h.GetSampleCount(), h.GetSampleSum())
	}
	egress := map[string]float64{}
	for _, mt := range fams["sbx_egress_attempts_total"].Metric {
		egress[mt.Label[0].GetValue()] = mt.GetCounter().GetValue()
	}
	if egress["allowed"] != 5 || egress["refused"] != 3 || egress["rate_limited"] != 2 {
		t.Errorf("sbx_egress_attempts_total %v, want allowed 5, refused 3, rate_limited 2", egress)
	}
	for _, l := range fams["sbx_limit_kills_total"].Metric[0].Label {
		if l.GetName() == "limit" && l.GetValue() != "memory" {
			t.Errorf("limit label %s", l.GetValue())
		}
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes", "sbx_exec_duration_seconds", "sbx_exec_queue_wait_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	// No label of any sbx_ metric is an id.
	for name, f := range fams {
		if !strings.HasPrefix(name, "sbx_") {
			continue
		}
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				switch l.GetName() {
				case "profile", "status", "limit", "decision", "reason", "result", "version", "commit", "goversion":
				default:
					t.Errorf("%s has label %s", name, l.GetName())
				}
			}
		}
	}
}

// TestOpenAPIDocument: the embedded document parses and validates as
// OpenAPI 3, and names exactly the routes the server registers.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	s, err := New(Config{Log: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range s.patterns {
		routes = append(routes, p)
	}
	sort.Strings(documented)
	sort.Strings(routes)
	if strings.Join(documented, "\n") != strings.Join(routes, "\n") {
		t.Errorf("the document's operations:\n%s\nthe server's routes:\n%s", strings.Join(documented, "\n"), strings.Join(routes, "\n"))
	}
}

// TestJobDeletedAfterItsRunEnded: a DELETE that lands after the run
// ended on its own (its Result is in, ok) but before the job is settled
// leaves it done with that Result; one that reached the run (a canceled
// Result) makes it canceled. A stress of sbx serve (1 in ~40 cancels at
// concurrency 16) saw "canceled" with a Result of "ok", "exited with
// status 0" and no word of a cancel.
func TestJobDeletedAfterItsRunEnded(t *testing.T) {
	line := func(st nsjail.Status) []byte {
		b, _ := json.Marshal(Event{Type: "result", Result: &ExecResponse{Result: &nsjail.Result{Status: st}, RequestID: "x"}})
		return append(b, '\n')
	}
	for _, tc := range []struct {
		name      string
		result    nsjail.Status // "": the run never answered
		cancelled bool
		want      JobState
	}{
		{"ran to its end, then deleted", nsjail.StatusOK, true, JobDone},
		{"exited 1, then deleted", nsjail.StatusExit, true, JobDone},
		{"killed by the cancel", nsjail.StatusCanceled, true, JobCanceled},
		{"ran, not deleted", nsjail.StatusOK, false, JobDone},
		{"deleted while queued", "", true, JobCanceled},
		{"never ran", "", false, JobFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &job{id: "x", state: JobQueued, changed: make(chan struct{})}
			w := &jobWriter{j: j, max: 100, header: http.Header{}}
			if tc.result != "" {
				w.WriteHeader(http.StatusOK)
				w.Write(line(tc.result))
			}
			// deleteJob's part, between the Result and the settle.
			j.cancelled = tc.cancelled
			j.settle(w.status)
			if j.state != tc.want {
				t.Errorf("state %s, want %s", j.state, tc.want)
			}
		})
	}
}
