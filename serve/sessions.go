package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/version"
	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/pool"
)

// Sessions (issue 15): one sandbox per session, whose payload is the
// session driver (nsjail.StartSession). The server keeps them in memory:
// a session lives on the host that made it, which the route header
// (SessionRouteHeader) lets a load balancer find again.

// Session defaults and bounds.
const (
	DefaultMaxSessions = 16
	DefaultSessionTTL  = time.Hour
	MaxSessionTTL      = 24 * time.Hour
	DefaultIdleTimeout = 10 * time.Minute
	// keepaliveEvery is how often a streamed exec writes a keepalive
	// line while its cell runs (proxies close silent connections).
	keepaliveEvery = 5 * time.Second
	// SessionRouteHeader names the node that holds a session (its
	// --node-name): every session response carries it, so that a load
	// balancer can route on it (or on the id, which starts with it:
	// sessionID).
	SessionRouteHeader = "X-Sbx-Session-Route"
)

// SessionRequest is the body of POST /v1/sessions.
type SessionRequest struct {
	Profile string                     `json:"profile"`
	Limits  map[string]json.RawMessage `json:"limits"`
	Env     map[string]string          `json:"env"`
	// TTL and IdleTimeout are durations ("30m") or seconds.
	TTL         json.RawMessage `json:"ttl"`
	IdleTimeout json.RawMessage `json:"idle_timeout"`
	Metadata    json.RawMessage `json:"metadata"`
	// FromSnapshot restores a snapshot's workspace (snapshots.go).
	FromSnapshot string `json:"from_snapshot"`
}

// SessionResponse is POST /v1/sessions' answer, and GET's.
type SessionResponse struct {
	ID          string    `json:"id"`
	ExpiresAt   time.Time `json:"expires_at"`
	IdleTimeout string    `json:"idle_timeout"`
	Profile     string    `json:"profile"`
	Executions  int       `json:"executions"`
	Running     bool      `json:"running"`
	// Pooled says the session was started ahead (--session-pool).
	Pooled bool `json:"pooled"`
}

// SessionExecRequest is the body of POST /v1/sessions/{id}/exec.
type SessionExecRequest struct {
	Code    *string           `json:"code"`
	Timeout json.RawMessage   `json:"timeout"`
	Env     map[string]string `json:"env"`
}

// SessionEvent is one line of a streamed session exec: "stdout",
// "stderr", "result", "error", "keepalive", and last "end" with the
// whole Execution.
type SessionEvent struct {
	Type      string             `json:"type"`
	Data      string             `json:"data,omitempty"`
	TMS       int64              `json:"t_ms"`
	Result    *nsjail.MIMEBundle `json:"result,omitempty"`
	Error     *nsjail.PyError    `json:"error,omitempty"`
	Execution *nsjail.Execution  `json:"execution,omitempty"`
}

// SessionEndReason is why a session ended (the metrics' reason label).
type SessionEndReason string

const (
	EndDeleted SessionEndReason = "deleted"
	EndTTL     SessionEndReason = "ttl"
	EndIdle    SessionEndReason = "idle"
	EndDied    SessionEndReason = "died" // its sandbox ended on its own (a limit)
	EndDrain   SessionEndReason = "drain"
)

type sessions struct {
	mu    sync.Mutex
	max   int
	route string
	byID  map[string]*liveSession
	// metrics gets the sessions' counters (ops's registry, metrics.go).
	metrics *Metrics
	closed  bool
	log     func(format string, args ...any)
	snaps   snapshots
	pool    pool.Set[*pooledSession]
}

type liveSession struct {
	id, token, profile string
	metadata           json.RawMessage
	ss                 *nsjail.Session
	cfg                *engine.Config
	proxy              *netproxy.Proxy // its own, for network mode "allow"; the sandbox's teardown closes it
	pooled             bool
	expires            time.Time
	idle               time.Duration
	// cell is held from a cell's start until its egress is taken, so
	// that a next cell's attempts never land in this one's Execution; a
	// cell that finds it held is busy, as nsjail.Session.Run says.
	cell sync.Mutex
	// active counts requests in progress; last is when the last ended.
	active atomic.Int64
	lastMu sync.Mutex
	last   time.Time
	end    sync.Once
	ended  chan struct{}
}

// newSessions keeps the sessions of node, their ids' prefix and their
// route (sessionID, SessionRouteHeader).
func newSessions(node string, max int, metrics *Metrics) *sessions {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &sessions{max: max, route: node, byID: map[string]*liveSession{}, metrics: metrics}
}

// active is how many sessions are open (sbx_sessions_active); one still
// starting holds its place (a nil entry) and is counted.
func (m *sessions) active() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// registerSessions comes after enableOps: the sessions feed its metrics.
func (s *Server) registerSessions() {
	s.sess = newSessions(s.cfg.NodeName, s.cfg.MaxSessions, s.ops.metrics)
	s.startSessionPool()
	s.sess.log = s.cfg.Log
	s.Handle("POST /v1/sessions", true, http.HandlerFunc(s.createSession))
	s.Handle("GET /v1/sessions/{id}", true, s.withSession(s.getSession))
	s.Handle("DELETE /v1/sessions/{id}", true, s.withSession(s.deleteSession))
	s.Handle("POST /v1/sessions/{id}/exec", true, s.withSession(s.sessionExec))
	s.Handle("POST /v1/sessions/{id}/interrupt", true, s.withSession(s.sessionInterrupt))
	s.Handle("POST /v1/sessions/{id}/restart", true, s.withSession(s.sessionRestart))
	s.Handle("POST /v1/sessions/{id}/snapshot", true, s.withSession(s.sessionSnapshot))
	s.Handle("GET /v1/sessions/{id}/files", true, s.withSession(s.sessionGetFile))
	s.Handle("PUT /v1/sessions/{id}/files", true, s.withSession(s.sessionPutFile))
	s.Handle("DELETE /v1/sessions/{id}/files", true, s.withSession(s.sessionDeleteFile))
}

// closeSessions ends every session (the drain).
func (s *Server) closeSessions() {
	m := s.sess
	m.mu.Lock()
	m.closed = true
	all := make([]*liveSession, 0, len(m.byID))
	for _, ls := range m.byID {
		if ls != nil { // nil: still starting; createSession sees closed
			all = append(all, ls)
		}
	}
	m.mu.Unlock()
	for _, ls := range all {
		m.finish(ls, EndDrain)
	}
	m.snaps.removeAll()
	if m.pool != nil {
		m.pool.Close()
	}
}

// finish ends a session once: its sandbox is destroyed, it is forgotten.
func (m *sessions) finish(ls *liveSession, why SessionEndReason) {
	ls.end.Do(func() {
		if why == EndDied && m.log != nil {
			m.log("session %s ended: %s", ls.id, ls.ss.EndReason())
		}
		m.mu.Lock()
		delete(m.byID, ls.id)
		m.mu.Unlock()
		m.metrics.sessionEnded(why)
		ls.ss.Close()
		// After the sandbox: the Config holds its image's lock.
		ls.cfg.Close()
		close(ls.ended)
	})
}

// watch ends the session at its TTL, after its idle timeout, or when
// its sandbox ends on its own.
func (m *sessions) watch(ls *liveSession) {
	ttl := time.NewTimer(time.Until(ls.expires))
	defer ttl.Stop()
	tick := time.NewTicker(min(ls.idle/4+time.Millisecond, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ls.ended:
			return
		case <-ttl.C:
			m.finish(ls, EndTTL)
			return
		case <-ls.ss.Done():
			m.finish(ls, EndDied)
			return
		case <-tick.C:
			ls.lastMu.Lock()
			idle := time.Since(ls.last)
			ls.lastMu.Unlock()
			if ls.active.Load() == 0 && idle >= ls.idle {
				m.finish(ls, EndIdle)
				return
			}
		}
	}
}

// parseDuration takes "30s" or a number of seconds; def when absent.
func parseDuration(raw json.RawMessage, field string, def time.Duration) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return def, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, badf("%s: %q is not a positive duration (\"30s\", \"10m\")", field, s)
		}
		return d, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f <= 0 {
		return 0, badf("%s: want a duration (\"30s\") or a positive number of seconds", field)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badf("body: %v", err)
	}
	return nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(SessionRouteHeader, s.sess.route)
	if s.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "draining", errDraining.Error())
		return
	}
	var req SessionRequest
	if err := decodeJSON(w, r, s.cfg.MaxBody, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if len(req.Metadata) > maxMetadata {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("metadata: larger than %d bytes", maxMetadata))
		return
	}
	ttl, err := parseDuration(req.TTL, "ttl", DefaultSessionTTL)
	if err == nil && ttl > MaxSessionTTL {
		err = badf("ttl: %v is more than %v", ttl, MaxSessionTTL)
	}
	var idle time.Duration
	if err == nil {
		idle, err = parseDuration(req.IdleTimeout, "idle_timeout", DefaultIdleTimeout)
	}
	ref := ""
	if err == nil {
		ref, err = s.profileRef(req.Profile)
	}
	var lower map[string]string
	if err == nil {
		lower, err = (&ExecRequest{Limits: req.Limits}).lower()
	}
	var cfg *engine.Config
	var ss *nsjail.Session
	// Until the session is kept (m.byID), whatever returns ends its
	// sandbox and releases its Config (the image's lock), in that order.
	kept := false
	defer func() {
		if !kept {
			if ss != nil {
				ss.Close()
			}
			cfg.Close()
		}
	}()
	id := sessionID(s.sess.route)
	if err == nil {
		cfg, err = engine.Build(id, engine.Request{Profile: ref, Lower: lower})
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var snap *snapshot
	if req.FromSnapshot != "" {
		if snap = s.sess.snaps.get(req.FromSnapshot, tokenName(r.Context())); snap == nil {
			writeError(w, http.StatusNotFound, "no_snapshot", fmt.Sprintf("from_snapshot: no snapshot %.80q on this host", req.FromSnapshot))
			return
		}
	}
	m := s.sess
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "draining", errDraining.Error())
		return
	}
	if len(m.byID) >= m.max {
		m.mu.Unlock()
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusTooManyRequests, "too_many_sessions", fmt.Sprintf("%d sessions are open (--max-sessions %d): delete one or retry later", m.max, m.max))
		return
	}
	// Held until the start is done: the cap counts starting sessions.
	m.byID[id] = nil
	m.mu.Unlock()

	// A request the pool's sessions fit (the profile as it is, no
	// environment of its own) takes one started ahead.
	pooled := false
	var proxy *netproxy.Proxy
	if len(req.Limits) == 0 && len(req.Env) == 0 {
		var ps *pooledSession
		if ps, pooled = m.pool.Claim(r.Context(), cfg.Profile.Name); pooled {
			// The pooled sandbox's Config is the one it runs on (the
			// same profile, built when it started).
			cfg.Close()
			ss, cfg, proxy = ps.Session, ps.cfg, ps.proxy
			m.mu.Lock()
			delete(m.byID, id)
			id = ss.ID()
			m.byID[id] = nil
			m.mu.Unlock()
		}
	}
	if !pooled {
		var p nsjail.Payload
		for k, v := range req.Env {
			p.Env = append(p.Env, k+"="+v)
		}
		job := cfg.Job(p, engine.Options{})
		// The session's life is its TTL: the sandbox's own wall limit is
		// the backstop of the watch below. The profile's wall_time
		// bounds each cell (sessionExec).
		job.Timeout = ttl + time.Minute
		ss, proxy, err = engine.StartSession(r.Context(), cfg, job)
	}
	if err != nil {
		m.mu.Lock()
		delete(m.byID, id)
		m.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "session_start", err.Error())
		return
	}
	if snap != nil {
		if err := restore(r, ss, snap); err != nil {
			m.mu.Lock()
			delete(m.byID, id)
			m.mu.Unlock()
			writeError(w, http.StatusInternalServerError, "session_start", err.Error())
			return
		}
	}
	ls := &liveSession{id: id, pooled: pooled, proxy: proxy, token: tokenName(r.Context()), metadata: req.Metadata, profile: cfg.Profile.Name, ss: ss, cfg: cfg, expires: time.Now().Add(ttl), idle: idle, last: time.Now(), ended: make(chan struct{})}
	m.mu.Lock()
	if m.closed {
		// The drain began while it started.
		delete(m.byID, id)
		m.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "draining", errDraining.Error())
		return
	}
	m.byID[id] = ls
	kept = true
	m.mu.Unlock()
	go m.watch(ls)
	writeJSON(w, http.StatusCreated, ls.info())
}

func (ls *liveSession) info() SessionResponse {
	in := ls.ss.Info()
	return SessionResponse{ID: ls.id, ExpiresAt: ls.expires.UTC(), IdleTimeout: ls.idle.String(), Profile: ls.profile, Executions: in.Executions, Running: in.Running, Pooled: ls.pooled}
}

// withSession finds the session of the path (only for the token that
// made it: another token's is not found), and marks it active while h
// runs.
func (s *Server) withSession(h func(http.ResponseWriter, *http.Request, *liveSession)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(SessionRouteHeader, s.sess.route)
		id := r.PathValue("id")
		s.sess.mu.Lock()
		ls := s.sess.byID[id]
		s.sess.mu.Unlock()
		if ls == nil || ls.token != tokenName(r.Context()) {
			if node, ok := sessionNode(id); ok && node != s.sess.route {
				s.writeMisdirected(w, id, node)
				return
			}
			writeError(w, http.StatusNotFound, "no_session", fmt.Sprintf("no session %.80q on node %s (it expired, was deleted, or was lost in a restart of the node)", id, s.sess.route))
			return
		}
		ls.active.Add(1)
		defer func() {
			ls.lastMu.Lock()
			ls.last = time.Now()
			ls.lastMu.Unlock()
			ls.active.Add(-1)
		}()
		h(w, r, ls)
	})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	writeJSON(w, http.StatusOK, ls.info())
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	s.sess.finish(ls, EndDeleted)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sessionInterrupt(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	writeJSON(w, http.StatusOK, map[string]bool{"interrupted": ls.ss.Interrupt()})
}

func (s *Server) sessionRestart(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	if err := ls.ss.Restart(r.Context()); err != nil {
		writeError(w, http.StatusConflict, "session_ended", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ls.info())
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	reqID := requestID(r)
	w.Header().Set("X-Request-Id", reqID)
	var req SessionExecRequest
	if err := decodeJSON(w, r, s.cfg.MaxBody, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if req.Code == nil {
		writeError(w, http.StatusBadRequest, "bad_request", "code: required")
		return
	}
	// A cell's timeout may only lower the profile's wall_time.
	wall := ls.cfg.Host.Wall
	timeout, err := parseDuration(req.Timeout, "timeout", wall)
	if err == nil && wall > 0 && timeout > wall {
		err = badf("timeout: %v is more than the profile's wall_time %v", timeout, wall)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("env: %.80q is not a variable name", k))
			return
		}
	}
	cell := nsjail.Cell{Code: *req.Code, Env: req.Env, Timeout: timeout}
	var st *stream
	t0 := time.Now()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if wantsStream(r) {
		st = newStream(w, t0, nsjail.SessionOutputLimit, func() { cancel(errClientGone) })
		out, errw := st.writer("stdout"), st.writer("stderr")
		cell.OnOutput = func(stream string, data []byte) {
			if stream == "stdout" {
				out.Write(data)
			} else {
				errw.Write(data)
			}
		}
		cell.OnResult = func(b *nsjail.MIMEBundle, e *nsjail.PyError) {
			ev := SessionEvent{Type: "result", TMS: time.Since(t0).Milliseconds(), Result: b}
			if e != nil {
				ev.Type, ev.Error = "error", e
			}
			st.sessionEvent(ev)
		}
		w.Header().Set("Content-Type", ndjson)
		w.WriteHeader(http.StatusOK)
		st.flush()
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(keepaliveEvery)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					st.sessionEvent(SessionEvent{Type: "keepalive", TMS: time.Since(t0).Milliseconds()})
				}
			}
		}()
	}
	var ex *nsjail.Execution
	if ls.cell.TryLock() {
		ex, err = ls.ss.Run(ctx, cell)
		if err == nil {
			// The cell's share of the session's proxy, counted as a
			// run's is.
			ex.Egress = engine.CellEgress(ls.proxy)
		}
		ls.cell.Unlock()
	} else {
		err = nsjail.ErrSessionBusy
	}
	if err != nil {
		code, status := "session_ended", http.StatusConflict
		if errors.Is(err, nsjail.ErrSessionBusy) {
			code = "session_busy"
		}
		if st != nil {
			st.sessionEvent(SessionEvent{Type: "end", TMS: time.Since(t0).Milliseconds(), Execution: &nsjail.Execution{Status: nsjail.ExecSessionEnded, Message: err.Error()}})
			return
		}
		writeError(w, status, code, err.Error())
		return
	}
	s.sess.metrics.sessionExecuted(ex.Status)
	if ex.Egress != nil {
		s.sess.metrics.countEgress(&ex.Egress.Summary)
	}
	s.auditCell(reqID, ls, *req.Code, t0, ex)
	if st != nil {
		// The results and the error went as they came (OnResult).
		st.sessionEvent(SessionEvent{Type: "end", TMS: time.Since(t0).Milliseconds(), Execution: ex})
		return
	}
	writeJSON(w, http.StatusOK, ex)
}

// sessionEvent writes one line of a streamed session exec.
func (st *stream) sessionEvent(e SessionEvent) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.broken {
		return
	}
	st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := st.enc.Encode(e); err != nil || st.rc.Flush() != nil {
		st.broken = true
		st.gone()
	}
}

func sessionFileError(w http.ResponseWriter, err error) {
	var we *nsjail.WorkspaceError
	switch {
	case errors.As(err, &we):
		status := http.StatusBadRequest
		if strings.Contains(we.Msg, "FileNotFoundError") {
			status = http.StatusNotFound
		}
		writeError(w, status, "workspace", err.Error())
	case errors.Is(err, nsjail.ErrFileTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
	case errors.Is(err, nsjail.ErrSessionEnded):
		writeError(w, http.StatusConflict, "session_ended", err.Error())
	default:
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	}
}

// sessionGetFile is GET .../files?path=P (the file's bytes, its sha256 in
// X-Sbx-Sha256), or without path the listing; a P that is a directory
// lists what is below it.
func (s *Server) sessionGetFile(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	path := r.URL.Query().Get("path")
	list := func(below string) {
		max, _ := strconv.Atoi(r.URL.Query().Get("max"))
		files, truncated, err := ls.ss.ListFiles(r.Context(), max)
		if err != nil {
			sessionFileError(w, err)
			return
		}
		if below != "" {
			kept := []nsjail.SessionFile{}
			for _, f := range files {
				if strings.HasPrefix(f.Path, below+"/") {
					kept = append(kept, f)
				}
			}
			files = kept
		}
		writeJSON(w, http.StatusOK, map[string]any{"files": files, "truncated": truncated})
	}
	if path == "" {
		list("")
		return
	}
	data, f, err := ls.ss.GetFile(r.Context(), path)
	var we *nsjail.WorkspaceError
	if errors.As(err, &we) && strings.HasPrefix(we.Msg, "IsADirectoryError:") {
		list(path)
		return
	}
	if err != nil {
		sessionFileError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Sbx-Sha256", f.SHA256)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// sessionPutFile is PUT .../files?path=P[&mode=0755] with the raw bytes
// as the body (at most --max-body).
func (s *Server) sessionPutFile(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	path := r.URL.Query().Get("path")
	mode := uint64(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o777 {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("mode: %.20q is not octal permission bits", m))
			return
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	f, err := ls.ss.PutFile(r.Context(), path, uint32(mode), io.Reader(body))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the file is larger than --max-body %d", s.cfg.MaxBody))
			return
		}
		sessionFileError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) sessionDeleteFile(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	if err := ls.ss.DeleteFile(r.Context(), r.URL.Query().Get("path")); err != nil {
		sessionFileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// auditCell writes one audit line for a cell: the session's id and the
// cell's number, the hash of its code, its status and usage, who asked.
// A cell that cannot be logged still ran: the server says so in its log
// (the Execution is already the client's).
func (s *Server) auditCell(reqID string, ls *liveSession, code string, t0 time.Time, ex *nsjail.Execution) {
	if s.cfg.Audit == nil {
		return
	}
	sum := sha256.Sum256([]byte(code))
	e := &audit.Entry{
		ID: fmt.Sprintf("%s/%d", ls.id, ex.ExecutionCount), Version: version.Version(), Commit: version.Commit(),
		StartedAt: t0.UTC(), FinishedAt: time.Now().UTC(), InvokingUID: os.Getuid(),
		Profile: ls.profile, ProfileSHA256: ls.cfg.ProfileSHA256(), CodeSHA256: hex.EncodeToString(sum[:]),
		Argv:   []string{fmt.Sprintf("<cell-%d>", ex.ExecutionCount)},
		Inputs: []nsjail.InputEntry{}, Files: []nsjail.FileEntry{}, Network: []nsjail.Attempt{},
		Usage:  nsjail.Usage{WallMS: ex.Usage.WallMS, CPUMS: ex.Usage.CPUMS, PeakMemoryBytes: ex.Usage.MemoryPeakBytes},
		Status: nsjail.Status(ex.Status), Message: ex.Message,
		Output:    audit.OutputCounts{StdoutBytes: ex.StdoutBytes, StderrBytes: ex.StderrBytes, StdoutTruncated: ex.StdoutTruncated, StderrTruncated: ex.StderrTruncated},
		RequestID: reqID, Token: ls.token, Metadata: ls.metadata,
	}
	if eg := ex.Egress; eg != nil {
		e.Network, e.NetworkSummary, e.NetworkTruncated = eg.Attempts, &eg.Summary, eg.Truncated
	}
	if err := s.cfg.Audit.Write(e); err != nil {
		s.cfg.Log("session %s cell %d: %v", ls.id, ex.ExecutionCount, err)
	}
}
