package nsjail

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sessionDriver is the session's keeper and kernel (session_driver.py):
// stdlib only, inside the binary, passed in argv, never read from the
// sandbox's files.
//
//go:embed session_driver.py
var sessionDriver string

// The session channel's frames (session_driver.py has the same): kind,
// seq (big-endian uint32: the cell, the request or the kernel's
// generation), flags (1 = more fragments follow), body. It is not the
// control pipe (wire.go): that one is the init's, line-framed and read
// by Go; this one is a SOCK_SEQPACKET socket between the supervisor and
// a Python payload, whose message boundaries the kernel keeps (unix(7)).
const (
	frameHeader = 6
	// frameBody is the driver's fragment size; a datagram is read whole
	// into a buffer of maxFrame (a longer one is cut, and fails to parse).
	frameBody = 60000
	maxFrame  = 128 << 10
)

// Frame kinds, host to driver.
const (
	frameCell      = 'c' // run a cell: {"code","env"}
	frameInterrupt = 'i' // SIGINT to the cell seq
	frameRestart   = 'k' // kill the kernel and all it started, start another
	framePut       = 'p' // a workspace file: header length, {"path","mode"}, bytes
	frameGet       = 'g' // {"path","max"}
	frameList      = 'l' // {"max"}
	frameUnlink    = 'u' // {"path"}
)

// Frame kinds, driver to host.
const (
	frameReady  = 'R' // a kernel started: seq is its generation
	frameStdout = 'o'
	frameStderr = 'e'
	frameResult = 'r' // a MIMEBundle
	frameError  = 'x' // a PyError
	frameDone   = 'd' // {"status","detail"}
	frameReply  = 'F' // a file request's answer
	frameData   = 'G' // a file's bytes (get)
)

// Session bounds: a hostile cell may write anything; nothing it writes
// grows the supervisor past these.
const (
	// SessionOutputLimit is each stream's cap per cell (head and tail).
	SessionOutputLimit = 1 << 20
	// maxLogChunks and maxLogBytes cap an Execution's logs.
	maxLogChunks = 4096
	maxLogBytes  = 2 << 20
	// maxResultBytes caps a cell's results, and one file request's
	// reply (a listing), in all.
	maxResultBytes = 16 << 20
	// MaxSessionFile caps a file fetched from a session's workspace.
	MaxSessionFile = 64 << 20
	// InterruptGrace is how long a timed-out cell has to yield to
	// KeyboardInterrupt before its interpreter is killed.
	InterruptGrace = 3 * time.Second
	// kernelStart bounds a kernel's start (a fork of the keeper).
	kernelStart = 30 * time.Second
)

// Errors of a session's use.
var (
	ErrSessionEnded = errors.New("nsjail: the session's sandbox has ended")
	ErrSessionBusy  = errors.New("nsjail: the session is running a cell")
)

// Session is one sandbox whose payload is the session driver: cells run
// one at a time in one Python interpreter, whose globals live until it is
// restarted; the workspace lives until Close.
type Session struct {
	sb   *Sandbox
	sock *os.File
	fd   int

	runMu  sync.Mutex // one cell, restart or Close at a time
	busy   sync.Mutex // held by Run; TryLock says busy
	wMu    sync.Mutex // frames are written whole
	mu     sync.Mutex // what follows
	count  int
	cur    *cell
	gen    uint32 // the kernel generation last seen ready
	lost   bool   // a kernel ended since the last cell: its state is gone
	readyC chan uint32
	reqs   map[uint32]*fileReq
	reqSeq uint32

	dead    chan struct{} // closed when the sandbox has ended
	result  *Result       // its Result, once dead
	started time.Time
}

// cell is the running cell, filled by the reader.
type cell struct {
	seq            uint32
	t0             time.Time
	stdout, stderr *capture
	logs           []LogChunk
	logBytes       int
	logsCut        bool
	results        []MIMEBundle
	resultBytes    int
	resultsCut     bool
	resultsWhy     string // what cut them (Execution.ResultsTruncatedReason)
	err            *PyError
	part           map[byte][]byte // fragments of a result or an error
	done           chan cellDone
	onOutput       func(stream string, data []byte)
	onResult       func(*MIMEBundle, *PyError)
	lost           bool // a kernel started during the cell

	// holding: from results[heldAt] on, the live copies wait for the
	// large items to be written to files (spillResults), so that a
	// stream says the same as the Execution, in order.
	holding bool
	heldAt  int
}

type cellDone struct {
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// StartSession starts job's sandbox with the session driver as its
// payload and returns once its interpreter is ready. The Job's Timeout is
// the session's life (its TTL): when it passes, the sandbox is killed.
// job.Payload's Env are the session's environment additions; its Argv is
// the driver's.
func StartSession(ctx context.Context, job *Job) (*Session, error) {
	job.Spec.Session, job.Spec.Warm = true, nil
	job.Stdin, job.Stdout, job.Stderr = nil, nil, nil
	sb, err := Start(ctx, job)
	if err != nil {
		return nil, err
	}
	p := &sb.s.p
	ss := &Session{sb: sb, sock: p.sessR, readyC: make(chan uint32, 8), reqs: map[uint32]*fileReq{}, dead: make(chan struct{}), started: time.Now()}
	p.sessR = nil // the session's now; closed by Close
	ss.fd = int(ss.sock.Fd())
	pl := Payload{Argv: []string{"python3", "-c", sessionDriver}, Env: job.Payload.Env, Lower: job.Payload.Lower}
	go func() {
		// The driver's own stdio is nobody's: the cells' goes through
		// it, on the socket.
		res, err := sb.Exec(context.Background(), pl, IO{Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			res = SetupFailure(job.Spec.ID, job.Spec.Profile, err)
		}
		ss.mu.Lock()
		ss.result = res
		ss.mu.Unlock()
		close(ss.dead)
	}()
	go ss.read()
	select {
	case g := <-ss.readyC:
		ss.mu.Lock()
		ss.gen = g
		ss.lost = false
		ss.mu.Unlock()
	case <-ss.dead:
		ss.Close()
		return nil, fmt.Errorf("session driver ended before it was ready: %s", ss.EndReason())
	case <-ctx.Done():
		ss.Close()
		return nil, context.Cause(ctx)
	case <-time.After(kernelStart):
		ss.Close()
		return nil, fmt.Errorf("session driver not ready within %v", kernelStart)
	}
	return ss, nil
}

// ID is the sandbox's id (Spec.ID: its cgroup's name, its Result's id).
func (ss *Session) ID() string { return ss.sb.s.job.Spec.ID }

// Done is closed when the session's sandbox has ended.
func (ss *Session) Done() <-chan struct{} { return ss.dead }

// Ended is the sandbox's Result once Done is closed, else nil.
func (ss *Session) Ended() *Result {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.result
}

// EndReason says why the sandbox ended, from its Result.
func (ss *Session) EndReason() string {
	res := ss.Ended()
	if res == nil {
		return "it was closed"
	}
	msg := string(res.Status)
	if res.Message != "" {
		msg += ": " + res.Message
	}
	if res.Stderr != "" {
		msg += " (driver stderr: " + res.Stderr + ")"
	}
	return msg
}

// Close kills the sandbox and destroys it: nothing of the session is left.
func (ss *Session) Close() error {
	ss.sb.Close()
	<-ss.dead
	ss.wMu.Lock()
	if ss.sock != nil {
		ss.sock.Close()
		ss.sock = nil
	}
	ss.wMu.Unlock()
	return nil
}

// send writes one message as frames of frameBody bytes.
func (ss *Session) send(kind byte, seq uint32, body []byte) error {
	for first := true; first || len(body) > 0; first = false {
		n := min(len(body), frameBody)
		if err := ss.sendFrame(kind, seq, n < len(body), body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// read dispatches the driver's frames until the socket ends (the
// sandbox's end). Each frame is bounded by maxFrame, each reassembly by
// its cap.
func (ss *Session) read() {
	buf := make([]byte, maxFrame)
	for {
		n, err := unix.Read(ss.fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil || n == 0 {
			ss.mu.Lock()
			if c := ss.cur; c != nil {
				select {
				case c.done <- cellDone{Status: "ended"}:
				default:
				}
			}
			for _, r := range ss.reqs {
				r.fail(ErrSessionEnded)
			}
			ss.reqs = map[uint32]*fileReq{}
			ss.mu.Unlock()
			return
		}
		if n < frameHeader {
			continue
		}
		kind, seq, more := buf[0], binary.BigEndian.Uint32(buf[1:5]), buf[5] == 1
		ss.dispatch(kind, seq, more, buf[frameHeader:n])
	}
}

func (ss *Session) dispatch(kind byte, seq uint32, more bool, body []byte) {
	ss.mu.Lock()
	live := ss.dispatchLocked(kind, seq, more, body)
	ss.mu.Unlock()
	// A streaming client is written to outside the lock: a slow one
	// holds the reader (and so the cell), never Interrupt or Info.
	if live != nil {
		live()
	}
}

// dispatchLocked files one frame; it returns the live copy of output to
// make once the lock is released, or nil.
func (ss *Session) dispatchLocked(kind byte, seq uint32, more bool, body []byte) func() {
	switch kind {
	case frameReady:
		if seq <= ss.gen {
			return nil
		}
		ss.gen = seq
		if ss.cur != nil {
			ss.cur.lost = true
		} else {
			ss.lost = true
		}
		select {
		case ss.readyC <- seq:
		default:
		}
		return nil
	case frameReply, frameData:
		if r := ss.reqs[seq]; r != nil {
			if r.take(kind, more, body) {
				delete(ss.reqs, seq)
			}
		}
		return nil
	}
	c := ss.cur
	if c == nil || c.seq != seq {
		return nil // not the running cell's: dropped
	}
	switch kind {
	case frameStdout, frameStderr:
		return c.output(kind, body)
	case frameResult, frameError:
		if c.part == nil {
			c.part = map[byte][]byte{}
		}
		p := c.part[kind]
		if c.resultBytes+len(body) > maxResultBytes {
			c.resultsCut = true
			c.resultsWhy = fmt.Sprintf("the cell's results passed %d bytes in flight (each item over %d bytes goes to a file, within that)", maxResultBytes, InlineResultBytes)
			if !more {
				delete(c.part, kind)
			}
			return nil
		}
		c.resultBytes += len(body)
		p = append(p, body...)
		if more {
			c.part[kind] = p
			return nil
		}
		delete(c.part, kind)
		if kind == frameResult {
			var b MIMEBundle
			if json.Unmarshal(p, &b) == nil {
				b.Files = nil // the supervisor's to fill (spillResults)
				c.results = append(c.results, b)
				if !c.holding && len(largeItems(&b)) > 0 {
					c.holding, c.heldAt = true, len(c.results)-1
				}
				if f := c.onResult; f != nil && !c.holding {
					return func() { f(&b, nil) }
				}
			}
		} else {
			var e PyError
			if json.Unmarshal(p, &e) == nil && c.err == nil {
				c.err = &e
				if f := c.onResult; f != nil {
					return func() { f(nil, &e) }
				}
			}
		}
	case frameDone:
		var d cellDone
		if json.Unmarshal(body, &d) != nil {
			d.Status = "error"
		}
		select {
		case c.done <- d:
		default:
		}
	}
	return nil
}

// output keeps a chunk in the cell's capture and logs; it returns the
// live copy to make, or nil.
func (c *cell) output(kind byte, data []byte) func() {
	stream, cp := "stdout", c.stdout
	if kind == frameStderr {
		stream, cp = "stderr", c.stderr
	}
	before := cp.Total()
	cp.Write(data)
	// The log keeps what the capture's head keeps, in order.
	keep := data
	if room := int64(SessionOutputLimit/2) - before; room < int64(len(keep)) {
		keep = keep[:max(0, room)]
	}
	if len(keep) < len(data) {
		c.logsCut = true
	}
	if len(keep) > 0 && len(c.logs) < maxLogChunks && c.logBytes+len(keep) <= maxLogBytes {
		c.logs = append(c.logs, LogChunk{Stream: stream, Data: string(keep), TMS: time.Since(c.t0).Milliseconds()})
		c.logBytes += len(keep)
	} else if len(keep) > 0 {
		c.logsCut = true
	}
	if c.onOutput != nil && len(keep) > 0 {
		f := c.onOutput
		return func() { f(stream, keep) }
	}
	return nil
}

// Cell is one cell to run.
type Cell struct {
	Code string
	// Env are variables set for this cell only.
	Env map[string]string
	// Timeout is the cell's wall time; 0 means none (the session's TTL).
	Timeout time.Duration
	// OnOutput, when set, gets the cell's output as it comes (within the
	// cap), from the session's reader: it must not block for long.
	OnOutput func(stream string, data []byte)
	// OnResult, when set, gets each result and the error as they come,
	// the same way.
	OnResult func(*MIMEBundle, *PyError)
}

// Run runs one cell and returns its Execution. ctx's end interrupts the
// cell as its timeout does. Only a session that is running a cell
// (ErrSessionBusy) or has ended (ErrSessionEnded) is an error.
func (ss *Session) Run(ctx context.Context, c Cell) (*Execution, error) {
	if !ss.busy.TryLock() {
		return nil, ErrSessionBusy
	}
	defer ss.busy.Unlock()
	ss.runMu.Lock()
	defer ss.runMu.Unlock()
	select {
	case <-ss.dead:
		return nil, ErrSessionEnded
	default:
	}
	body, err := json.Marshal(map[string]any{"code": c.Code, "env": c.Env})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	st0, _ := ss.stats()
	ss.mu.Lock()
	ss.count++
	cl := &cell{seq: uint32(ss.count), t0: t0, stdout: newCapture(SessionOutputLimit, nil), stderr: newCapture(SessionOutputLimit, nil),
		done: make(chan cellDone, 1), onOutput: c.OnOutput, onResult: c.OnResult, lost: ss.lost}
	ss.lost = false
	ss.cur = cl
	ex := &Execution{ExecutionCount: ss.count}
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		ss.cur = nil
		ss.mu.Unlock()
	}()
	if err := ss.send(frameCell, cl.seq, body); err != nil {
		ex.Status, ex.Message = ExecSessionEnded, err.Error()
		return ss.finishExec(ex, cl, t0, st0), nil
	}
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var d cellDone
	select {
	case d = <-cl.done:
	case <-timeout:
		ex.Status, ex.Message = ExecTimeout, fmt.Sprintf("the cell passed its timeout (%v) and was interrupted (KeyboardInterrupt)", c.Timeout)
		d = ss.interrupt(cl, ex)
	case <-ctx.Done():
		ex.Status, ex.Message = ExecInterrupted, "interrupted: "+context.Cause(ctx).Error()
		d = ss.interrupt(cl, ex)
	case <-ss.dead:
		d = cellDone{Status: "ended"}
	}
	switch d.Status {
	case "ok":
		if ex.Status == "" {
			ex.Status = ExecOK
		}
	case "error":
		if ex.Status == "" {
			ex.Status = ExecError
		}
	case "interrupted":
		if ex.Status == "" {
			ex.Status, ex.Message = ExecInterrupted, "interrupted (KeyboardInterrupt)"
		}
	case "died":
		ex.Status, ex.Message = ExecKilled, d.Detail+"; a new interpreter was started"
		if st, ok := ss.stats(); ok && st.OOMKills > st0.OOMKills {
			ex.Message = fmt.Sprintf("%s (the memory limit: the cgroup's OOM killer killed %d processes of the session during the cell)", ex.Message, st.OOMKills-st0.OOMKills)
		}
		ss.awaitReady()
	case "killed":
		// interrupt killed it (ex says why)
	default:
		ex.Status = ExecSessionEnded
		<-ss.dead
		ex.Message = "the session's sandbox ended: " + ss.EndReason()
	}
	if ex.Status != ExecSessionEnded {
		ss.spillResults(cl)
	}
	return ss.finishExec(ex, cl, t0, st0), nil
}

// interrupt sends the cell SIGINT, and when it does not yield within
// InterruptGrace, kills its interpreter (everything but the keeper) and
// waits for the next.
func (ss *Session) interrupt(cl *cell, ex *Execution) cellDone {
	ss.send(frameInterrupt, cl.seq, nil)
	t := time.NewTimer(InterruptGrace)
	defer t.Stop()
	select {
	case d := <-cl.done:
		return d
	case <-ss.dead:
		return cellDone{Status: "ended"}
	case <-t.C:
	}
	ex.Message += fmt.Sprintf("; it did not yield within %v, so its interpreter was killed and restarted", InterruptGrace)
	if err := ss.restart(); err != nil {
		return cellDone{Status: "ended"}
	}
	ss.mu.Lock()
	cl.lost = true
	ss.mu.Unlock()
	return cellDone{Status: "killed"}
}

// restart kills the kernel and waits for the next one; a keeper that
// does not answer ends the session (fail closed).
func (ss *Session) restart() error {
	ss.mu.Lock()
	next := ss.gen + 1
	ss.mu.Unlock()
	if err := ss.send(frameRestart, next, nil); err != nil {
		return err
	}
	if err := ss.awaitReady(); err != nil {
		ss.sb.Close()
		return err
	}
	return nil
}

func (ss *Session) awaitReady() error {
	t := time.NewTimer(kernelStart)
	defer t.Stop()
	select {
	case <-ss.readyC:
		return nil
	case <-ss.dead:
		return ErrSessionEnded
	case <-t.C:
		return fmt.Errorf("the session's interpreter did not restart within %v", kernelStart)
	}
}

// Restart starts a new interpreter: the globals are gone, the workspace
// stays.
func (ss *Session) Restart(ctx context.Context) error {
	ss.runMu.Lock()
	defer ss.runMu.Unlock()
	select {
	case <-ss.dead:
		return ErrSessionEnded
	default:
	}
	if err := ss.restart(); err != nil {
		return err
	}
	ss.mu.Lock()
	ss.lost = false // the client asked: the next cell knows
	ss.mu.Unlock()
	return nil
}

// Interrupt sends the running cell SIGINT; it reports whether one was
// running.
func (ss *Session) Interrupt() bool {
	ss.mu.Lock()
	c := ss.cur
	ss.mu.Unlock()
	if c == nil {
		return false
	}
	ss.send(frameInterrupt, c.seq, nil)
	return true
}

func (ss *Session) finishExec(ex *Execution, cl *cell, t0 time.Time, st0 sessionStats) *Execution {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ex.Stdout, ex.StdoutTruncated, ex.StdoutBytes = cl.stdout.String(), cl.stdout.Truncated(), cl.stdout.Total()
	ex.Stderr, ex.StderrTruncated, ex.StderrBytes = cl.stderr.String(), cl.stderr.Truncated(), cl.stderr.Total()
	ex.Logs, ex.LogsTruncated = cl.logs, cl.logsCut
	ex.Results, ex.ResultsTruncated, ex.ResultsTruncatedReason = cl.results, cl.resultsCut, cl.resultsWhy
	if ex.Logs == nil {
		ex.Logs = []LogChunk{}
	}
	if ex.Results == nil {
		ex.Results = []MIMEBundle{}
	}
	ex.Error = cl.err
	ex.StateLost = cl.lost
	if ex.Error != nil && ex.Error.Name == "MemoryError" {
		// Without a cgroup the memory limit is RLIMIT_AS: the cell
		// gets MemoryError instead of the OOM killer (evidence
		// python_memory_error in a Result).
		ex.Limit = "memory"
	}
	ex.Usage.WallMS = time.Since(t0).Milliseconds()
	if st, ok := ss.stats(); ok {
		ex.Usage.CPUMS = max(0, (st.UserCPU + st.SystemCPU - st0.UserCPU - st0.SystemCPU).Milliseconds())
		ex.Usage.MemoryPeakBytes = st.PeakMemoryBytes
		switch {
		case st.OOMKills > st0.OOMKills:
			ex.Limit = "memory"
		case st.PidsMaxEvents > st0.PidsMaxEvents:
			ex.Limit = "pids"
		}
	}
	return ex
}

// stats are the sandbox's cgroup's, when it has one.
func (ss *Session) stats() (st sessionStats, ok bool) {
	s := ss.sb.s
	select {
	case <-s.cgReady:
	default:
		return st, false
	}
	if s.cg == nil {
		return st, false
	}
	c, err := s.cg.Stats()
	if err != nil {
		return st, false
	}
	return sessionStats{c.UserCPU, c.SystemCPU, c.PeakMemoryBytes, c.OOMKills, c.PidsMaxEvents}, true
}

// sessionStats are the cgroup's counts a cell's Execution is made of.
type sessionStats struct {
	UserCPU, SystemCPU time.Duration
	PeakMemoryBytes    int64
	OOMKills           int64
	PidsMaxEvents      int64
}

// SessionInfo is what a session says of itself.
type SessionInfo struct {
	Executions int
	Running    bool
}

// Info says how many cells ran and whether one is running.
func (ss *Session) Info() SessionInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return SessionInfo{Executions: ss.count, Running: ss.cur != nil}
}
