package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// ExecResponse is the Result of `sbx exec --json`, the same fields, plus
// the request's id and the copied-out files.
type ExecResponse struct {
	*nsjail.Result
	RequestID string `json:"request_id"`
	// Outputs are the files the run created or changed, when the request
	// asked for them, within --max-outputs bytes in all.
	Outputs []OutputFile `json:"outputs,omitempty"`
}

// OutputFile is one copied-out file, inline.
type OutputFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	ContentB64 string `json:"content_b64"`
}

// Event is one line of a streamed response (Accept: application/x-ndjson).
type Event struct {
	// Type is "stdout", "stderr" or, last, "result".
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
	// TMS is when the output was read, in ms since the run was admitted.
	TMS    int64         `json:"t_ms"`
	Result *ExecResponse `json:"result,omitempty"`
}

const ndjson = "application/x-ndjson"

// requestIDPattern is what a client's X-Request-Id may be to be kept: it
// goes into the audit log and response headers, so nothing else.
// Compiled on first use, not at package init: every sbx process, the
// init included, runs every package's init (issue 13).
var requestIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`) })

func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); requestIDPattern().MatchString(id) {
		return id
	}
	return newID()
}

// exec is POST /v1/exec: read and check the request (before it holds a
// worker), build its Config, admit it, run it, answer with the Result.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	reqID := requestID(r)
	w.Header().Set("X-Request-Id", reqID)
	if s.draining.Load() {
		s.ops.metrics.reject(rejectDraining)
		writeError(w, http.StatusServiceUnavailable, "draining", errDraining.Error())
		return
	}
	// A throttled token is refused before its body is read: it costs
	// the host one cheap 429.
	if s.throttled(w, tokenName(r.Context())) {
		return
	}
	req, status, err := s.readRequest(w, r)
	if err != nil {
		writeError(w, status, "bad_request", err.Error())
		return
	}
	ref, err := s.profileRef(req.Profile)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	lower, err := req.lower()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	cfg, err := engine.Build(newID(), engine.Request{Profile: ref, Lower: lower})
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	// The profile's image (if it has one) stays locked in the store
	// until the run is answered.
	defer cfg.Close()
	dir, err := s.work.run()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	defer os.RemoveAll(dir)
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.Mkdir(inDir, 0o700); err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	payload, err := req.payload(inDir)
	if err != nil {
		var br *badRequest
		if errors.As(err, &br) {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		} else {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
		}
		return
	}
	// What execve(2) inside would refuse with E2BIG is refused here, as
	// sbx exec does, before it costs a sandbox.
	if err := engine.CheckExecSize(payload.Argv, append(append([]string{}, cfg.Spec.Env...), payload.Env...)); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "argv or env: "+err.Error())
		return
	}
	if err := s.adm.enter(); err != nil {
		if errors.Is(err, errDraining) {
			writeError(w, http.StatusServiceUnavailable, "draining", err.Error())
			return
		}
		// A run takes seconds: one is a fair first wait, and a client
		// that backs off exponentially from it does not hammer.
		s.rejectedBusy()
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("%v (%d running, %d waiting: --max-concurrent %d, --queue %d); retry later",
			err, s.adm.running(), s.adm.waiting(), s.adm.max, s.adm.queue))
		return
	}
	// The run ends with the client (a disconnect cancels it) or with the
	// drain's timeout, whichever comes first.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.killCtx, func() { cancel(context.Cause(s.killCtx)) })
	defer stop()
	admitted := time.Now()
	if err := s.adm.acquire(ctx); err != nil {
		s.adm.leave(false)
		if errors.Is(err, ErrDrained) {
			writeError(w, http.StatusServiceUnavailable, "draining", err.Error())
		}
		return // else the client is gone: no one to answer
	}
	defer s.adm.leave(true)
	wait := time.Since(admitted)

	opts := engine.Options{Stdin: strings.NewReader(req.Stdin), Start: s.cfg.Start}
	if req.Outputs {
		opts.OutputDir = outDir
	}
	var st *stream
	if wantsStream(r) {
		st = newStream(w, admitted, cfg.Host.Output, func() { cancel(errClientGone) })
		opts.Stdout, opts.Stderr = st.writer("stdout"), st.writer("stderr")
		w.Header().Set("Content-Type", ndjson)
		w.WriteHeader(http.StatusOK)
		st.flush()
	}
	res := engine.Run(ctx, cfg, payload, opts)
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrJobCanceled):
		res.Warnings = append(res.Warnings, "cancelled: "+ErrJobCanceled.Error())
	case errors.Is(cause, ErrDrained):
		res.Warnings = append(res.Warnings, "killed by the drain: "+ErrDrained.Error())
		res.Message = fmt.Sprintf("%s (%v), and was killed", ErrDrained, s.cfg.DrainTimeout)
	case cause != nil && r.Context().Err() != nil, errors.Is(cause, errClientGone):
		res.Warnings = append(res.Warnings, "the client went away: the run was cancelled")
	}
	// An input's source is the server's temp file, gone with the
	// request: the client knows it by where it came in the request.
	for i := range res.Inputs {
		res.Inputs[i].Source = inputSource(req, res.Inputs[i].Path)
	}
	resp := &ExecResponse{Result: res, RequestID: reqID}
	if req.Outputs {
		resp.Outputs = s.outputs(res, outDir)
	}
	who := engine.Who{RequestID: reqID, Token: tokenName(r.Context()), Metadata: req.Metadata}
	if s.cfg.Audit != nil {
		if err := engine.Audit(s.cfg.Audit, cfg, res, payload, false, who); err != nil {
			// A run that cannot be logged fails, as in `sbx exec`.
			res.Status, res.ExitCode, res.Signal = nsjail.StatusSetupError, nsjail.ExitSbxFailed, nil
			res.Message = err.Error()
			s.cfg.Log("request %s: %v", reqID, err)
		}
	}
	s.finished(Finished{RequestID: reqID, Token: who.Token, Profile: cfg.Profile.Name, Result: res, QueueWait: wait})
	if st != nil {
		st.event(Event{Type: "result", TMS: time.Since(admitted).Milliseconds(), Result: resp})
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// inputSource names where an input came from in the request: "code", or
// "files[N]".
func inputSource(req *ExecRequest, path string) string {
	if req.Code != nil && path == codeFile {
		return "code"
	}
	for i, f := range req.Files {
		if f.Path == path {
			return fmt.Sprintf("files[%d]", i)
		}
	}
	return ""
}

// errClientGone cancels a run whose streamed response cannot be written.
var errClientGone = errors.New("the client went away")

// readRequest reads the body within MaxBody bytes and BodyTimeout, so a
// slow or endless client holds a connection, never a worker.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (*ExecRequest, int, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	req, err := decodeRequest(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err == nil {
		// The deadline goes once the body is in: net/http's background
		// read, which notices a client going away, would end the run at
		// it.
		rc.SetReadDeadline(time.Time{})
	} else {
		// The deadline stays: net/http reads what is left of a body
		// after the handler, and a client that stalls would hold the
		// connection for ever. The connection closes after the answer.
		w.Header().Set("Connection", "close")
	}
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body: past the server's %d bytes (--max-body)", s.cfg.MaxBody)
	case errors.As(err, &ne) && ne.Timeout():
		return nil, http.StatusRequestTimeout, fmt.Errorf("request body: not read within %v", s.cfg.BodyTimeout)
	case err != nil:
		return nil, http.StatusBadRequest, err
	}
	if err := req.check(s.cfg.MaxFiles); err != nil {
		return nil, http.StatusBadRequest, err
	}
	return req, 0, nil
}

// profileRef is the profile a request names, if the server offers it.
func (s *Server) profileRef(name string) (string, error) {
	if name == "" {
		return s.cfg.Profiles[0], nil
	}
	for _, p := range s.cfg.Profiles {
		if p == name {
			return p, nil
		}
	}
	return "", fmt.Errorf("profile %q: not offered by this server (it offers %s)", name, strings.Join(s.cfg.Profiles, ", "))
}

func wantsStream(r *http.Request) bool {
	for _, a := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, _ := strings.Cut(strings.TrimSpace(a), ";"); strings.EqualFold(mt, ndjson) {
			return true
		}
	}
	return false
}

// outputs reads the files the run copied to dir, within MaxOutputs bytes
// in all; the rest are named in a warning. Their host paths, in a
// directory that is removed with the request, are not the client's.
func (s *Server) outputs(res *nsjail.Result, dir string) []OutputFile {
	out := []OutputFile{}
	left := s.cfg.MaxOutputs
	var skipped []string
	for i := range res.Files {
		e := &res.Files[i]
		if e.CopiedTo == "" {
			continue
		}
		where := e.CopiedTo
		e.CopiedTo = ""
		b, err := readRegular(where, left)
		if err != nil {
			skipped = append(skipped, e.Path+" ("+err.Error()+")")
			continue
		}
		left -= int64(len(b))
		out = append(out, OutputFile{Path: e.Path, Size: int64(len(b)), ContentB64: base64.StdEncoding.EncodeToString(b)})
	}
	if len(skipped) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("outputs: %d files not inlined, starting with %s", len(skipped), skipped[0]))
	}
	return out
}

// readRegular reads a regular file of at most max bytes, not following a
// link (the copy is sbx's own, but a cap is a cap).
func readRegular(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case fi.Size() > max:
		return nil, fmt.Errorf("%d bytes, past what is left of --max-outputs", fi.Size())
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// stream writes NDJSON events as the payload prints: each write flushed,
// each bounded by writeTimeout. A stream that cannot be written cancels
// the run (gone); a stream past the output cap stops being sent (the
// Result keeps head and tail, as without streaming).
type stream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	rc    *http.ResponseController
	enc   *json.Encoder
	t0    time.Time
	limit int64
	sent  map[string]int64
	// partial holds a stream's last bytes that end inside a UTF-8
	// sequence, so that a character split between two reads is sent whole.
	partial map[string][]byte
	broken  bool
	gone    func()
}

func newStream(w http.ResponseWriter, t0 time.Time, limit int64, gone func()) *stream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &stream{w: w, rc: http.NewResponseController(w), enc: enc, t0: t0, limit: limit, sent: map[string]int64{}, partial: map[string][]byte{}, gone: gone}
}

func (st *stream) writer(kind string) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.broken || st.sent[kind] >= st.limit {
			return len(b), nil
		}
		data := append(st.partial[kind], b...)
		cut := completeUTF8(data)
		st.partial[kind] = append([]byte(nil), data[cut:]...)
		data = data[:cut]
		if left := st.limit - st.sent[kind]; int64(len(data)) > left {
			data = data[:left]
		}
		st.sent[kind] += int64(len(data))
		if len(data) > 0 {
			st.write(Event{Type: kind, Data: strings.ToValidUTF8(string(data), "\uFFFD"), TMS: time.Since(st.t0).Milliseconds()})
		}
		return len(b), nil
	})
}

// event writes one event (the final result).
func (st *stream) event(e Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.broken {
		st.write(e)
	}
}

func (st *stream) write(e Event) {
	st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := st.enc.Encode(e); err != nil || st.rc.Flush() != nil {
		st.broken = true
		st.gone()
	}
}

func (st *stream) flush() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.rc.Flush()
}

// completeUTF8 is the length of b without a trailing incomplete UTF-8
// sequence (at most 3 bytes).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
