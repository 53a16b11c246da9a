package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// JobsConfig bounds what the async jobs hold. A job's run is a POST
// /v1/exec run: same checks, same admission (a job holds a running or
// waiting place like a sync run, and past both the POST gets 429), same
// audit line and metrics. What a job adds is memory, so each bound here
// is a bound on it.
type JobsConfig struct {
	// TTL is how long a finished job is kept (default 10 minutes);
	// expired jobs are removed at the next request that touches jobs.
	TTL time.Duration
	// MaxJobs is how many jobs are kept at once, finished or not
	// (default 1000): the oldest finished go first.
	MaxJobs int
	// MaxBytes caps the events and Results of the finished jobs kept, in
	// all (default 256 MiB): the oldest finished go first.
	MaxBytes int64
	// MaxEventBytes caps one job's stdout and stderr events (default
	// 1 MiB): past it, one "truncated" event says so and the rest are not
	// kept. The Result, which keeps the head and tail of the output
	// within the profile's cap, is always kept.
	MaxEventBytes int64
}

// Defaults of JobsConfig.
const (
	DefaultJobTTL        = 10 * time.Minute
	DefaultMaxJobs       = 1000
	DefaultMaxJobBytes   = 256 << 20
	DefaultMaxEventBytes = 1 << 20
	// maxErrorBody bounds what a job keeps of a run's error answer: it
	// is a short {"error":{...}} object.
	maxErrorBody = 16 << 10
)

// JobState is where a job is, the "status" of GET /v1/jobs/{id}.
type JobState string

const (
	JobQueued   JobState = "queued"   // admitted, waiting for a worker
	JobRunning  JobState = "running"  // holds a worker
	JobDone     JobState = "done"     // ran; result is its Result
	JobCanceled JobState = "canceled" // DELETE ended it; result is there if it had started
	JobFailed   JobState = "failed"   // never ran: error says why (the server was busy or draining)
)

func (s JobState) finished() bool { return s == JobDone || s == JobCanceled || s == JobFailed }

// ErrJobCanceled is the cause of a run that DELETE /v1/jobs/{id} ended.
var ErrJobCanceled = errors.New("the job was cancelled by DELETE /v1/jobs/{id}")

// job is one async run and what it has said so far.
type job struct {
	id, token string
	created   time.Time
	cancel    context.CancelCauseFunc

	mu         sync.Mutex
	state      JobState
	cancelled  bool
	started    time.Time
	finishedAt time.Time
	// events are NDJSON lines (each ends in \n) in the order the run
	// wrote them: what GET .../events replays.
	events   [][]byte
	size     int64 // bytes of events
	outBytes int64 // bytes of stdout/stderr events kept
	dropped  int64 // bytes of stdout/stderr events not kept
	result   json.RawMessage
	// resultStatus is the Result's status: canceled when the cancel
	// reached the run (settle).
	resultStatus nsjail.Status
	errStatus    int
	errBody      []byte
	// changed is closed, and replaced, whenever the above moves: the
	// events streams wait on it.
	changed chan struct{}
}

// JobView is the body of GET /v1/jobs/{id} and of POST's 202.
type JobView struct {
	ID         string     `json:"id"`
	Status     JobState   `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// EventsDropped is how many bytes of output events were not kept
	// (MaxEventBytes); the Result still has the output's head and tail.
	EventsDropped int64 `json:"events_dropped_bytes"`
	// Result is the ExecResponse of POST /v1/exec once the run is over.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is why a failed job never ran: {"code","message"}.
	Error json.RawMessage `json:"error,omitempty"`
}

func (j *job) view() JobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := JobView{ID: j.id, Status: j.state, CreatedAt: j.created, EventsDropped: j.dropped, Result: j.result}
	if !j.started.IsZero() {
		t := j.started
		v.StartedAt = &t
	}
	if !j.finishedAt.IsZero() {
		t := j.finishedAt
		v.FinishedAt = &t
	}
	if j.state == JobFailed {
		var e apiError
		if json.Unmarshal(j.errBody, &e) == nil && e.Error.Code != "" {
			v.Error, _ = json.Marshal(e.Error)
		} else {
			v.Error, _ = json.Marshal(map[string]string{"code": "internal", "message": fmt.Sprintf("the run answered %d", j.errStatus)})
		}
	}
	return v
}

// notify wakes the events streams; j.mu is held.
func (j *job) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// jobWriter is the http.ResponseWriter the job's run writes to: the
// exec handler streams NDJSON events into it (it asked with Accept:
// application/x-ndjson), or answers an error before running.
type jobWriter struct {
	j       *job
	max     int64
	header  http.Header
	status  int
	partial []byte
}

func (w *jobWriter) Header() http.Header { return w.header }

// WriteHeader: 200 is written once the run holds a worker; anything else
// is an error answered before the run (429, 503).
func (w *jobWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if code == http.StatusOK {
		j := w.j
		j.mu.Lock()
		if j.state == JobQueued {
			j.state = JobRunning
		}
		j.started = time.Now()
		j.notify()
		j.mu.Unlock()
	}
}

// Flush is there because the stream flushes after each event; a writer
// without it would make the stream think the client went away.
func (w *jobWriter) Flush() {}

func (w *jobWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status != http.StatusOK {
		w.j.mu.Lock()
		if room := maxErrorBody - len(w.j.errBody); room > 0 {
			w.j.errBody = append(w.j.errBody, b[:min(len(b), room)]...)
		}
		w.j.mu.Unlock()
		return len(b), nil
	}
	// One Encode is one Write, but a line is only taken whole.
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(w.partial[:i+1])
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) == 0 {
		w.partial = nil
	}
	return len(b), nil
}

// line keeps one event: output events within max bytes, the result
// always.
func (w *jobWriter) line(l []byte) {
	var head struct {
		Type string `json:"type"`
		TMS  int64  `json:"t_ms"`
		// Result is the ExecResponse, raw.
		Result json.RawMessage `json:"result"`
	}
	json.Unmarshal(l, &head)
	var res struct {
		Status nsjail.Status `json:"status"`
	}
	if head.Type == "result" {
		json.Unmarshal(head.Result, &res)
	}
	j := w.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if head.Type == "result" {
		j.result = append(json.RawMessage(nil), head.Result...)
		j.resultStatus = res.Status
	} else if j.outBytes+int64(len(l)) > w.max {
		if j.dropped == 0 {
			note, _ := json.Marshal(Event{Type: "truncated", TMS: head.TMS,
				Data: fmt.Sprintf("output events past %d bytes are not kept; the result has the output's head and tail", w.max)})
			note = append(note, '\n')
			j.events = append(j.events, note)
			j.size += int64(len(note))
			j.notify()
		}
		j.dropped += int64(len(l))
		return
	} else {
		j.outBytes += int64(len(l))
	}
	j.events = append(j.events, append([]byte(nil), l...))
	j.size += int64(len(l))
	j.notify()
}

// jobStore holds the jobs by id, within JobsConfig's bounds.
type jobStore struct {
	cfg JobsConfig
	now func() time.Time

	mu   sync.Mutex
	jobs map[string]*job
	// held is the bytes of the finished jobs kept.
	held int64
}

func newJobStore(cfg JobsConfig) *jobStore {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultJobTTL
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxJobBytes
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	return &jobStore{cfg: cfg, now: time.Now, jobs: map[string]*job{}}
}

// errJobsFull: every kept job is unfinished and the count cap is reached.
var errJobsFull = errors.New("the server holds --max-jobs unfinished jobs")

// add keeps j unless unfinished jobs already number maxUnfinished (the
// admission's places: more could not run anyway) or the count cap is
// reached with no finished job to drop.
func (st *jobStore) add(j *job, maxUnfinished int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweepLocked()
	unfinished := 0
	for _, o := range st.jobs {
		if !o.stateOf().finished() {
			unfinished++
		}
	}
	if unfinished >= maxUnfinished {
		return errFull
	}
	for len(st.jobs) >= st.cfg.MaxJobs {
		if !st.dropOldestLocked("") {
			return errJobsFull
		}
	}
	st.jobs[j.id] = j
	return nil
}

func (j *job) stateOf() JobState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state
}

func (j *job) sizeOf() (int64, time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size + int64(len(j.errBody)), j.finishedAt
}

// get is the job id of token, if it is kept.
func (st *jobStore) get(id, token string) *job {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweepLocked()
	j := st.jobs[id]
	if j == nil || j.token != token {
		// Another token's job is as absent as an unknown one.
		return nil
	}
	return j
}

func (st *jobStore) remove(j *job) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.jobs[j.id] == j {
		delete(st.jobs, j.id)
		if n, _ := j.sizeOf(); j.stateOf().finished() {
			st.held -= n
		}
	}
}

// finished accounts for j's bytes now that it is over, and drops the
// oldest finished jobs (j last) while the byte cap is passed.
func (st *jobStore) finished(j *job) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.jobs[j.id] != j {
		return
	}
	n, _ := j.sizeOf()
	st.held += n
	for st.held > st.cfg.MaxBytes && st.dropOldestLocked(j.id) {
	}
	if st.held > st.cfg.MaxBytes {
		delete(st.jobs, j.id)
		st.held -= n
	}
}

// dropOldestLocked removes the finished job that finished first, but
// keep; false when there is none.
func (st *jobStore) dropOldestLocked(keep string) bool {
	var oldest *job
	var at time.Time
	for id, j := range st.jobs {
		if id == keep || !j.stateOf().finished() {
			continue
		}
		if _, t := j.sizeOf(); oldest == nil || t.Before(at) {
			oldest, at = j, t
		}
	}
	if oldest == nil {
		return false
	}
	n, _ := oldest.sizeOf()
	delete(st.jobs, oldest.id)
	st.held -= n
	return true
}

// sweepLocked removes the jobs finished more than TTL ago.
func (st *jobStore) sweepLocked() {
	now := st.now()
	for id, j := range st.jobs {
		n, t := j.sizeOf()
		if j.stateOf().finished() && now.Sub(t) > st.cfg.TTL {
			delete(st.jobs, id)
			st.held -= n
		}
	}
}

func (st *jobStore) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.jobs)
}

// postJob is POST /v1/jobs: the request is read and checked as POST
// /v1/exec's (400 here, not later), admitted the same way (429 here when
// no place is left), then run in the background; 202 {id,...}.
func (s *Server) postJob(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		s.ops.metrics.reject(rejectDraining)
		writeError(w, http.StatusServiceUnavailable, "draining", errDraining.Error())
		return
	}
	req, status, err := s.readRequest(w, r)
	if err != nil {
		writeError(w, status, "bad_request", err.Error())
		return
	}
	// The job is checked as POST /v1/exec checks a run, so that what the
	// run would refuse is a 400 now, not a 202 and a failed job.
	if err := s.checkJob(req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	token := tokenName(r.Context())
	if s.throttled(w, token) {
		return
	}
	body, err := json.Marshal(req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	ctx, cancel := context.WithCancelCause(withToken(context.Background(), token))
	j := &job{id: newID(), token: token, created: time.Now(), cancel: cancel, state: JobQueued, changed: make(chan struct{})}
	if err := s.ops.jobs.add(j, s.adm.max+s.adm.queue); err != nil {
		cancel(nil)
		s.ops.metrics.reject(rejectBusy)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("%v (%d running, %d waiting: --max-concurrent %d, --queue %d); retry later",
			err, s.adm.running(), s.adm.waiting(), s.adm.max, s.adm.queue))
		return
	}
	run, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/exec", bytes.NewReader(body))
	run.Header.Set("Content-Type", "application/json")
	run.Header.Set("Accept", ndjson)
	// The job's id is its run's request_id: the audit line names it.
	run.Header.Set("X-Request-Id", j.id)
	// The 202 says what the job was when it was accepted: queued (its
	// run may take a worker before the answer is written).
	accepted := j.view()
	go s.runJob(j, run)
	w.Header().Set("Location", "/v1/jobs/"+j.id)
	writeJSON(w, http.StatusAccepted, accepted)
}

// runJob runs j through the exec handler and settles its state.
func (s *Server) runJob(j *job, run *http.Request) {
	defer j.cancel(nil)
	jw := &jobWriter{j: j, max: s.ops.jobs.cfg.MaxEventBytes, header: http.Header{}}
	s.exec(jw, run)
	j.settle(jw.status)
	s.ops.jobs.finished(j)
}

// settle decides how the job ended once its run has answered (status:
// what the run wrote as its HTTP status, 0 if nothing). A DELETE counts
// only if it reached the run: its Result says canceled. One that came
// after the run had ended on its own (the Result made, with the
// payload's own status, and no word of a cancel) leaves the job done
// with that Result: canceled would say the Result is not what the
// payload did.
func (j *job) settle(status int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.result != nil && j.cancelled && j.resultStatus == nsjail.StatusCanceled:
		j.state = JobCanceled
	case j.result != nil:
		j.state = JobDone
	case j.cancelled:
		// Cancelled while it waited for a worker: it never ran.
		j.state = JobCanceled
	default:
		j.state = JobFailed
		if j.errStatus = status; j.errStatus == 0 || j.errStatus == http.StatusOK {
			j.errStatus = http.StatusInternalServerError
		}
		if len(j.errBody) == 0 {
			j.errBody, _ = json.Marshal(map[string]any{"error": map[string]string{"code": "internal", "message": "the run ended without a Result"}})
		}
	}
	j.finishedAt = time.Now()
	j.notify()
}

func (s *Server) jobOf(w http.ResponseWriter, r *http.Request) *job {
	j := s.ops.jobs.get(r.PathValue("id"), tokenName(r.Context()))
	if j == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("job %q: no such job (unknown, another token's, deleted, or expired after %v)", r.PathValue("id"), s.ops.jobs.cfg.TTL))
	}
	return j
}

// getJob is GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if j := s.jobOf(w, r); j != nil {
		writeJSON(w, http.StatusOK, j.view())
	}
}

// deleteJob is DELETE /v1/jobs/{id}: an unfinished job is cancelled (202,
// its run killed, its Result kept with status canceled); a finished one
// is removed (204).
func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	j := s.jobOf(w, r)
	if j == nil {
		return
	}
	j.mu.Lock()
	fin := j.state.finished()
	if !fin {
		j.cancelled = true
		j.notify()
	}
	j.mu.Unlock()
	if fin {
		s.ops.jobs.remove(j)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	j.cancel(ErrJobCanceled)
	writeJSON(w, http.StatusAccepted, j.view())
}

// jobEvents is GET /v1/jobs/{id}/events: every event so far, from the
// first, then the rest as they come, until the result (or, for a job
// that never ran, an "error" event). Each write is bounded by
// writeTimeout, so a reader that stops reading holds its connection only
// that long; the job's events are shared, never copied per reader.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	j := s.jobOf(w, r)
	if j == nil {
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", ndjson)
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	next := 0
	for {
		j.mu.Lock()
		batch := j.events[next:len(j.events):len(j.events)]
		fin, state, changed := j.state.finished(), j.state, j.changed
		var errLine []byte
		if fin && next+len(batch) == len(j.events) && state == JobFailed {
			errLine = j.errBody
		}
		j.mu.Unlock()
		for _, l := range batch {
			rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write(l); err != nil {
				return
			}
		}
		next += len(batch)
		if errLine != nil {
			var e apiError
			json.Unmarshal(errLine, &e)
			b, _ := json.Marshal(Event{Type: "error", Data: e.Error.Code + ": " + e.Error.Message})
			w.Write(append(b, '\n'))
		}
		if len(batch) > 0 || errLine != nil {
			if rc.Flush() != nil {
				return
			}
		}
		if fin {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// jobIDs lists the kept jobs' ids, sorted (tests).
func (st *jobStore) jobIDs() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for id := range st.jobs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// checkJob refuses what the job's run would: an unknown profile, a limit
// raised, an argv or env execve(2) would refuse (E2BIG). Its Config is
// released at once (an image's lock); the run builds its own.
func (s *Server) checkJob(req *ExecRequest) error {
	ref, err := s.profileRef(req.Profile)
	if err != nil {
		return err
	}
	lower, err := req.lower()
	if err != nil {
		return err
	}
	cfg, err := engine.Build(newID(), engine.Request{Profile: ref, Lower: lower})
	if err != nil {
		return err
	}
	defer cfg.Close()
	dir, err := os.MkdirTemp("", "sbx-job-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	payload, err := req.payload(dir)
	if err != nil {
		return err
	}
	if err := engine.CheckExecSize(payload.Argv, append(append([]string{}, cfg.Spec.Env...), payload.Env...)); err != nil {
		return fmt.Errorf("argv or env: %w", err)
	}
	return nil
}
