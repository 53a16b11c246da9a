// Package serve is `sbx serve`: the engine over HTTP/1.1 and JSON. Each
// POST /v1/exec is one run of engine.Build + engine.Run, the Result of
// `sbx exec --json` plus a request_id, or streamed as NDJSON. The server
// adds what a shared service needs around the one core: bearer tokens,
// admission (--max-concurrent running, --queue waiting, then 429), caps on
// what a client may send, a drain on SIGTERM and one audit line per run.
//
// Handlers are thin: decode and check the request (request.go), admit it
// (admission.go), run it (exec.go). What a later piece adds (metrics,
// async jobs, the OpenAPI document) plugs in through Handle and
// Config.OnResult; the warm pool through Config.Start.
package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/version"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// Defaults of the caps a client meets.
const (
	DefaultListen      = "127.0.0.1:8377"
	DefaultMaxBody     = 32 << 20
	DefaultMaxFiles    = 256
	DefaultMaxOutputs  = 16 << 20
	DefaultDrain       = 30 * time.Second
	DefaultBodyTimeout = 30 * time.Second
	// readHeaderTimeout bounds a client's request line and headers
	// (Slowloris): it holds a connection, never a worker.
	readHeaderTimeout = 10 * time.Second
	// writeTimeout bounds each write of a streamed response: a client
	// that stops reading cannot hold a run past it.
	writeTimeout = 30 * time.Second
)

// Token is one bearer token the server accepts; Name is what the audit
// line records (never the secret).
type Token struct {
	Name, Secret string
}

// Config is the server's: plain data but for the hooks.
type Config struct {
	// Tokens are the accepted bearer tokens; with none, no token is
	// asked (a unix socket, or loopback TCP; see CheckListen).
	Tokens []Token
	// Profiles are the profiles clients may name (built-in names or file
	// paths); the first is the default of a request without one.
	Profiles []string
	// MaxConcurrent runs at once, and Queue more waiting; past both a
	// request gets 429.
	MaxConcurrent, Queue int
	// MaxBody caps a request body; MaxFiles its input files; MaxOutputs
	// the bytes of copied-out files a response carries inline.
	MaxBody    int64
	MaxFiles   int
	MaxOutputs int64
	// BodyTimeout bounds reading one request body.
	BodyTimeout time.Duration
	// DrainTimeout is how long in-flight runs may go on after SIGTERM.
	DrainTimeout time.Duration
	// Audit, when set, gets one line per run.
	Audit *audit.Log
	// Pools are the warm pools (--pool), started by Serve within
	// MaxConcurrent, whose claim is Start when that is nil; PoolFeed,
	// when set, is told of their claims, sizes and starts (the metrics;
	// pool.go).
	Pools    []PoolSpec
	PoolFeed PoolFeed
	// Start builds each run's sandbox (a warm pool's Claim); nil runs
	// cold. See engine.Options.Start.
	Start engine.Starter
	// OnResult is called with each finished run (metrics plug in here).
	OnResult func(Finished)
	// Jobs bounds the async jobs; Breaker is the circuit breaker per
	// token (ops.go).
	Jobs    JobsConfig
	Breaker BreakerConfig
	// Log gets the server's own messages (stderr by default).
	Log func(format string, args ...any)
	// MaxSessions caps the open sessions (sessions.go).
	MaxSessions int
	// SessionPool keeps N sessions started ahead, by profile name
	// (--session-pool PROFILE=N): a POST /v1/sessions of that profile
	// without limits or env takes one (session_pool.go).
	SessionPool map[string]int
	// NodeName is this node's name (--node-name; NodeName checks it):
	// every response carries it in NodeHeader (node.go).
	NodeName string
}

// Finished is one run as the OnResult hook sees it.
type Finished struct {
	RequestID string
	Token     string
	Profile   string
	Result    *nsjail.Result
	// QueueWait is how long the run waited for a worker.
	QueueWait time.Duration
}

// Server is a running `sbx serve`.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	adm      *admission
	pools    *pools
	http     *http.Server
	draining atomic.Bool
	// kill ends the runs still going when the drain times out.
	killCtx context.Context
	kill    context.CancelCauseFunc
	ops     *ops
	// work holds the runs' files (workdir.go).
	work workDir
	// patterns are the routes Handle registered (the OpenAPI test).
	patterns []string
	sess     *sessions
}

// ErrDrained is the cause of the runs a drain killed.
var ErrDrained = errors.New("sbx serve was shutting down and the run passed --drain-timeout")

// New checks cfg and builds the server; it listens on nothing yet.
func New(cfg Config) (*Server, error) {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = runtime.NumCPU()
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("--queue %d: must be 0 or more", cfg.Queue)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.MaxOutputs <= 0 {
		cfg.MaxOutputs = DefaultMaxOutputs
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrain
	}
	if cfg.Log == nil {
		cfg.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "sbx serve: "+format+"\n", args...) }
	}
	if len(cfg.Profiles) == 0 {
		cfg.Profiles = profiles.Names()
	}
	// Every profile offered must load now: a broken one is a start-up
	// error naming the file and line, not a 500 on the first request.
	for _, ref := range cfg.Profiles {
		if _, err := profiles.Load(ref); err != nil {
			return nil, fmt.Errorf("--profiles %s: %w", ref, err)
		}
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), adm: newAdmission(cfg.MaxConcurrent, cfg.Queue)}
	ps, err := newPools(cfg.Pools, cfg.Profiles, startBudget{s.adm}, cfg.PoolFeed)
	if err != nil {
		return nil, err
	}
	s.pools = ps
	if s.cfg.Start == nil && len(cfg.Pools) > 0 {
		s.cfg.Start = ps.starter
	}
	// What a server SIGKILLed in this TMPDIR left (its runs' files).
	removed, err := sweepWorkDirs(os.TempDir())
	if len(removed) > 0 {
		cfg.Log("removed the files of %d runs a server that died left in %s: %v", len(removed), os.TempDir(), removed)
	}
	if err != nil {
		cfg.Log("left in %s: %v", os.TempDir(), err)
	}
	s.killCtx, s.kill = context.WithCancelCause(context.Background())
	if cfg.NodeName, err = NodeName(cfg.NodeName); err != nil {
		return nil, err
	}
	s.cfg.NodeName = cfg.NodeName
	s.http = &http.Server{
		Handler:           withNode(cfg.NodeName, s.mux),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	s.Handle("GET /healthz", false, http.HandlerFunc(s.healthz))
	s.Handle("GET /readyz", false, http.HandlerFunc(s.readyz))
	s.Handle("GET /v1/version", true, http.HandlerFunc(s.version))
	s.Handle("GET /v1/profiles", true, http.HandlerFunc(s.profiles))
	s.Handle("POST /v1/exec", true, http.HandlerFunc(s.exec))
	s.enableOps()
	if s.pools.feed == nil {
		// The warm pools feed the sbx_pool_* and sbx_sandbox_start_*
		// metrics; they start in Serve, after this.
		s.pools.feed = s.ops.metrics.Pool()
	}
	// After enableOps: the sessions feed ops's metrics.
	s.registerSessions()
	return s, nil
}

// Handle registers h for pattern (net/http's ServeMux syntax, "GET
// /metrics"); with auth, the bearer token is checked first. It is how
// later pieces plug in: /metrics, /v1/jobs, /v1/openapi.json.
func (s *Server) Handle(pattern string, auth bool, h http.Handler) {
	if auth {
		h = s.authenticated(h)
	}
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

// Serve serves ln until Drain; it returns nil after a drain.
func (s *Server) Serve(ln net.Listener) error {
	s.pools.start(s.cfg.Log)
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Drain is SIGTERM's: readiness goes 503 and new runs are refused at
// once; the runs in flight get DrainTimeout to finish, and those still
// going are then killed (their Results say why) and answered; the
// listener closes. It returns when every run is over and reported.
func (s *Server) Drain() {
	// The warm sandboxes serve no one now: they go at once, leaving the
	// CPU to the runs in flight (a run that claims meanwhile misses, and
	// runs cold).
	pooled := make(chan struct{})
	go func() { s.pools.close(); close(pooled) }()
	defer func() { <-pooled }()
	s.draining.Store(true)
	s.cfg.Log("draining: no new runs; %d running, %d waiting get %v", s.adm.running(), s.adm.waiting(), s.cfg.DrainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	done := s.adm.close()
	s.closeSessions()
	select {
	case <-done:
	case <-ctx.Done():
		s.cfg.Log("drain timeout: killing %d runs", s.adm.running()+s.adm.waiting())
		s.kill(ErrDrained)
		<-done
	}
	// The runs are all answered: what is left are idle connections.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.http.Close()
	}
	// After Shutdown: no handler is left to make a run's directory.
	s.work.remove()
}

// authenticated checks the bearer token, in constant time against each
// token so that a timing does not tell how much of a guess was right.
func (s *Server) authenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.Tokens) == 0 {
			h.ServeHTTP(w, r.WithContext(withToken(r.Context(), "")))
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name := ""
		if ok {
			for _, t := range s.cfg.Tokens {
				if subtle.ConstantTimeCompare([]byte(got), []byte(t.Secret)) == 1 && name == "" {
					name = t.Name
				}
			}
		}
		if name == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sbx"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required: Authorization: Bearer TOKEN (see --token-file)")
			return
		}
		h.ServeHTTP(w, r.WithContext(withToken(r.Context(), name)))
	})
}

type tokenKey struct{}

func withToken(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, tokenKey{}, name)
}

func tokenName(ctx context.Context) string {
	n, _ := ctx.Value(tokenKey{}).(string)
	return n
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 503 while draining, at capacity (every worker busy and the
// queue full), or when a warm pool cannot build sandboxes (its latest
// start failed and none is ready): a load balancer sends the next request
// elsewhere.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	case s.adm.full():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "at capacity"})
	case s.pools.broken() != "":
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "cannot build sandboxes", "error": s.pools.broken()})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": version.Version(), "commit": version.Commit(), "go": runtime.Version()})
}

// profileInfo is one entry of /v1/profiles.
type profileInfo struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Default     bool           `json:"default"`
	Limits      map[string]any `json:"limits"`
	Network     string         `json:"network"`
	Seccomp     string         `json:"seccomp"`
	// Pool is the profile's warm pool (--pool), absent without one.
	Pool *PoolInfo `json:"pool,omitempty"`
}

// profiles lists what clients may ask for, with the limits a request may
// lower.
func (s *Server) profiles(w http.ResponseWriter, r *http.Request) {
	out := []profileInfo{}
	for i, ref := range s.cfg.Profiles {
		p, err := profiles.Load(ref)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "profile", err.Error())
			return
		}
		info := profileInfo{Name: ref, Description: p.Description, Default: i == 0, Limits: map[string]any{}, Network: p.Network.Mode, Seccomp: p.Seccomp.Policy, Pool: s.pools.info(ref)}
		for _, st := range p.Settings() {
			if k, ok := strings.CutPrefix(st.Key, "limits."); ok {
				info.Limits[k] = st.Value
			}
		}
		out = append(out, info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"profiles": out})
}

// apiError is the body of every error: {"error":{"code","message"}}.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// writeJSON sends v whole, with its Content-Length: a Result is larger
// than net/http's 2 KB chunking buffer, so it went out chunked, its
// headers and first chunk before the rest; with the length known up
// front, a body cut short (a server killed mid-write) is unambiguous to
// every client and proxy, and the body leaves in one write.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		var e apiError
		e.Error.Code, e.Error.Message = "internal", "encoding the response: "+err.Error()
		json.NewEncoder(&b).Encode(e)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
