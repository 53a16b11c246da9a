package nsjail

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The init's two inherited pipes (see doc.go for the sequence).
const (
	controlFD = 3 // supervisor -> init: Spec, Payload, file bytes, then Control lines
	statusFD  = 4 // init -> supervisor: Status lines
	filesFD   = 5 // init -> supervisor: the workspace report (files.go)
	proxyFD   = 6 // unix socket: the proxy's listening socket goes to the supervisor
	sessionFD = 7 // SOCK_SEQPACKET: a session's channel, the payload's fd 3 (Spec.Session)
)

// initArg is argv[1] of the re-executed binary that makes it the init.
const initArg = "__sbx_init"

// ctlKind names a message on the control pipe: each line is one ctlMsg.
type ctlKind string

// Control message kinds, in the order they cross (doc.go).
const (
	ctlSpec    ctlKind = "spec"    // the sandbox to build: Spec
	ctlConfine ctlKind = "confine" // what the init loads before ready: Confine
	ctlPayload ctlKind = "payload" // what runs, its input bytes after it: Payload
	ctlControl ctlKind = "control" // a signal or kill for the payload: Control
)

// maxCtlFrame bounds one control line of each kind, its '\n' excluded:
// the init never buffers more. A Spec is a few KiB (the mount plan and
// env); a Confine's line the filter's errno map and holds, and the late
// rlimits (its two programs follow it raw, within maxProgramBytes each:
// the programs' frame below); a
// Payload's argv is bounded by execve's ARG_MAX (a quarter of the 8 MiB
// stack rlimit, 2 MiB; execve(2)), which JSON can escape to 6 bytes a
// byte, plus its list of inputs; a Control is a few bytes. The
// supervisor refuses to send a larger one (encodeCtl).
var maxCtlFrame = map[ctlKind]int{
	ctlSpec:    1 << 20,
	ctlConfine: 1 << 20,
	ctlPayload: 16 << 20,
	ctlControl: 256,
}

// ctlMsg is one line on the control pipe: a union of which exactly the
// field its Kind names is set.
type ctlMsg struct {
	Kind    ctlKind  `json:"kind"`
	Spec    *Spec    `json:"spec,omitempty"`
	Confine *Confine `json:"confine,omitempty"`
	Payload *Payload `json:"payload,omitempty"`
	Control *Control `json:"control,omitempty"`
}

// check says whether m is a well-formed union: a known kind, with its
// own field and no other.
func (m *ctlMsg) check() error {
	if _, ok := maxCtlFrame[m.Kind]; !ok {
		return fmt.Errorf("control message of unknown kind %.64q", m.Kind)
	}
	for _, f := range []struct {
		kind ctlKind
		set  bool
	}{{ctlSpec, m.Spec != nil}, {ctlConfine, m.Confine != nil}, {ctlPayload, m.Payload != nil}, {ctlControl, m.Control != nil}} {
		switch {
		case f.kind == m.Kind && !f.set:
			return fmt.Errorf("%s message without its %s", m.Kind, f.kind)
		case f.kind != m.Kind && f.set:
			return fmt.Errorf("%s message with a %s in it", m.Kind, f.kind)
		}
	}
	return nil
}

// encodeCtl is the one encoder of the control pipe: m as one line, within
// its kind's frame; a Confine's line is followed by its programs' frame.
//
// The message is built in one buffer: the line is encoded into it (the
// Encoder adds the newline json.Marshal would need a second copy for) and
// the programs are appended once, not first joined into a frame of their
// own (issue 13: each copy of the ~16 KB of programs faults in fresh heap
// pages of a supervisor that never collects).
func encodeCtl(m ctlMsg) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	var programs [][]byte
	if m.Kind == ctlConfine {
		c, progs, err := m.Confine.splitPrograms()
		if err != nil {
			return nil, fmt.Errorf("encode %s message: %w", m.Kind, err)
		}
		m.Confine, programs = c, progs
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(m); err != nil {
		return nil, fmt.Errorf("encode %s message: %w", m.Kind, err)
	}
	if max := maxCtlFrame[m.Kind]; b.Len()-1 > max {
		return nil, fmt.Errorf("%s message of %d bytes, more than the control pipe's %d", m.Kind, b.Len()-1, max)
	}
	if len(programs) == 0 {
		return b.Bytes(), nil
	}
	out := make([]byte, 0, b.Len()+len(programs[0])+len(programs[1]))
	out = append(out, b.Bytes()...)
	for _, p := range programs {
		out = append(out, p...)
	}
	return out, nil
}

// decodeCtl decodes one control line strictly (decodeStrict) and checks
// it is a well-formed union; a Confine's programs, which follow its line,
// are not read (expect reads them). It is pure, for the tests.
func decodeCtl(line []byte) (ctlMsg, error) {
	var m ctlMsg
	if err := decodeStrict(line, &m); err != nil {
		return ctlMsg{}, err
	}
	if err := m.check(); err != nil {
		return ctlMsg{}, err
	}
	if m.Kind == ctlConfine {
		if err := m.Confine.checkFrame(); err != nil {
			return ctlMsg{}, err
		}
	}
	return m, nil
}

// The programs' frame. The Confine's two BPF programs (21.5 KB for
// strict) used to cross inside its JSON line, in base64: the init's
// encoding/json scanned every byte of them, and the supervisor's encoded
// them, ~0.5 ms in all before the filter's load (issue 13, "the last
// round trips"). They cross raw now, right after the line: the line says
// their sizes (Confine.BPFBytes, FallbackBytes), each a whole number of
// 8-byte instructions (struct sock_filter) and at most BPF_MAXINSNS
// (4096) of them, which the kernel refuses past (seccomp(2), EINVAL);
// the init reads exactly that many bytes, no more, and nothing of a
// program may be in the line itself. Only bytes are framed, never JSON:
// the line keeps its strict decoder (docs/DESIGN.md).
const maxProgramBytes = 4096 * 8

// checkProgramSize says whether n bytes can be a program of the frame
// (optional: n may be 0).
func checkProgramSize(what string, n int, optional bool) error {
	if (n == 0 && optional) || (n > 0 && n%8 == 0 && n <= maxProgramBytes) {
		return nil
	}
	return fmt.Errorf("confine message: %s program of %d bytes (want a multiple of 8, 8 to %d)", what, n, maxProgramBytes)
}

// checkFrame checks what a Confine's line says of its programs' frame:
// sizes within bounds, with a filter, and no program in the line itself.
func (c *Confine) checkFrame() error {
	if c.Seccomp == nil {
		if c.BPFBytes != 0 || c.FallbackBytes != 0 {
			return fmt.Errorf("confine message: programs of %d and %d bytes without a filter", c.BPFBytes, c.FallbackBytes)
		}
		return nil
	}
	if c.Seccomp.BPF != nil || c.Seccomp.Fallback != nil {
		return errors.New("confine message: a program inside the line (they follow it raw)")
	}
	if err := checkProgramSize("the filter's", c.BPFBytes, false); err != nil {
		return err
	}
	return checkProgramSize("the fallback", c.FallbackBytes, true)
}

// splitPrograms is c as its line carries it, without the programs, and
// the programs that follow the line, in their order there (the filter,
// then the fallback, back to back); nil without a filter.
func (c *Confine) splitPrograms() (*Confine, [][]byte, error) {
	out := *c
	out.BPFBytes, out.FallbackBytes = 0, 0
	if c.Seccomp == nil {
		return &out, nil, nil
	}
	f := *c.Seccomp
	out.Seccomp = &f
	out.BPFBytes, out.FallbackBytes = len(f.BPF), len(f.Fallback)
	programs := [][]byte{f.BPF, f.Fallback}
	f.BPF, f.Fallback = nil, nil
	if err := out.checkFrame(); err != nil {
		return nil, nil, err
	}
	return &out, programs, nil
}

// readPrograms reads the programs' frame that follows c's line (checked
// by decodeCtl) into c.Seccomp: exactly the sizes the line gives.
func (c *Confine) readPrograms(r io.Reader) error {
	if c.Seccomp == nil {
		return nil
	}
	buf := make([]byte, c.BPFBytes+c.FallbackBytes)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read the confine message's programs (%d and %d bytes): %w", c.BPFBytes, c.FallbackBytes, err)
	}
	c.Seccomp.BPF = buf[:c.BPFBytes:c.BPFBytes]
	if c.FallbackBytes > 0 {
		c.Seccomp.Fallback = buf[c.BPFBytes:]
	}
	return nil
}

// expect reads the next control line, which must be a message of kind k
// within k's frame: the init reads the pipe in a fixed order, and any
// other message there means it cannot trust the rest (fail closed).
func expect(br *bufio.Reader, k ctlKind) (ctlMsg, error) {
	line, err := readFrame(br, maxCtlFrame[k])
	if err != nil {
		return ctlMsg{}, fmt.Errorf("read %s message from the control pipe: %w", k, err)
	}
	m, err := decodeCtl(line)
	if err != nil {
		return ctlMsg{}, fmt.Errorf("control pipe, want a %s message: %w", k, err)
	}
	if m.Kind != k {
		return ctlMsg{}, fmt.Errorf("control pipe: a %s message where a %s message belongs", m.Kind, k)
	}
	if k == ctlConfine {
		if err := m.Confine.readPrograms(br); err != nil {
			return ctlMsg{}, err
		}
	}
	return m, nil
}

// Control is a message from the supervisor after the Payload.
type Control struct {
	// Signal asks the init to forward this signal to the payload.
	Signal int `json:"signal,omitempty"`
	// Kill asks the init to kill every process of the sandbox but
	// itself, then report as usual (the workspace included).
	Kill bool `json:"kill,omitempty"`
}

// statusKind names a status message of the init.
type statusKind string

// Status kinds sent by the init.
const (
	kindError   statusKind = "error"   // a setup step failed: Step, Path, Errno, Msg
	kindReady   statusKind = "ready"   // the sandbox is built, waiting for the payload
	kindStarted statusKind = "started" // the payload runs as Pid (in the sandbox's pid ns)
	kindExit    statusKind = "exit"    // the payload ended: WaitStatus, Rusage, or ExecErrno
	kindWarning statusKind = "warning" // something after the payload went wrong: Msg
)

// StatusMsg is one line from the init on fd 4.
type StatusMsg struct {
	Kind  statusKind `json:"kind"`
	Step  string     `json:"step,omitempty"`
	Path  string     `json:"path,omitempty"`
	Errno int        `json:"errno,omitempty"`
	Msg   string     `json:"msg,omitempty"`
	Pid   int        `json:"pid,omitempty"`
	// WaitStatus is the payload's raw wait(2) status.
	WaitStatus uint32 `json:"wait_status,omitempty"`
	// ExecErrno is set when the payload could not be executed at all.
	ExecErrno int `json:"exec_errno,omitempty"`
	// Rusage of every process the init reaped (RUSAGE_CHILDREN).
	UserUS   int64 `json:"user_us,omitempty"`
	SystemUS int64 `json:"system_us,omitempty"`
	MaxRSSKB int64 `json:"maxrss_kb,omitempty"`
	// Tasks is how many tasks the sandbox held when the payload ended,
	// counted by the init before it killed the rest: the payload (as
	// one), what it left behind, and the init's own threads
	// (countTasks).
	Tasks int `json:"tasks,omitempty"`
	// Marks are the init's step timings (Payload.Timings).
	Marks []Mark `json:"marks,omitempty"`
	// Filtered says a seccomp filter was loaded; Denials counts what it
	// refused by syscall number, when DenialsKnown; DenialsOther counts
	// the calls of numbers past the first maxDenialKinds.
	Filtered     bool        `json:"filtered,omitempty"`
	Denials      map[int]int `json:"denials,omitempty"`
	DenialsOther int         `json:"denials_other,omitempty"`
	DenialsKnown bool        `json:"denials_known,omitempty"`
	// FilterKilled says the init killed the payload itself for the
	// filter: a call through another ABI (init_seccomp_linux.go).
	FilterKilled bool `json:"filter_killed,omitempty"`
	// PyError is what the Python runner reported the payload died of
	// (Payload.CaptureError, or a warm payload).
	PyError *PyError `json:"py_error,omitempty"`
	// Figures are the PNGs the runner rendered of the figures the
	// payload left (Payload.FigureBytes), as it sent them: the
	// supervisor checks each (finish.go, takeFigures). FiguresCut: some
	// were left out, by the runner's budget or the init's caps.
	Figures    [][]byte `json:"figures,omitempty"`
	FiguresCut bool     `json:"figures_cut,omitempty"`
}

// cpuTime is the CPU time the kernel accounted to the payload and every
// process it reaped (RUSAGE_CHILDREN of the init).
func (m *StatusMsg) cpuTime() time.Duration {
	return time.Duration(m.UserUS+m.SystemUS) * time.Microsecond
}

// StepError is a failed setup step inside the sandbox, as the host sees
// it: "sbx init: pivot_root /tmp: operation not permitted".
type StepError struct {
	Step  string
	Path  string
	Errno syscall.Errno
	Msg   string
}

func (e *StepError) Error() string {
	if e.Msg != "" {
		return "sbx init: " + e.Msg
	}
	if e.Path != "" {
		return fmt.Sprintf("sbx init: %s %s: %v", e.Step, e.Path, e.Errno)
	}
	return fmt.Sprintf("sbx init: %s: %v", e.Step, e.Errno)
}

func (e *StepError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// stepErrorMsg turns an init-side error into its wire form, keeping the
// errno of the innermost syscall error.
func stepErrorMsg(step, path string, err error) StatusMsg {
	m := StatusMsg{Kind: kindError, Step: step, Path: path, Msg: fmt.Sprintf("%s: %v", step, err)}
	var errno unix.Errno
	if errors.As(err, &errno) {
		m.Errno = int(errno)
	}
	return m
}

func (m StatusMsg) stepError() *StepError {
	return &StepError{Step: m.Step, Path: m.Path, Errno: syscall.Errno(m.Errno), Msg: m.Msg}
}

// maxStatusLine bounds one status line. The longest the init sends is the
// exit message: rusage, at most maxDenialKinds denial counts (~20 bytes
// each) and a few dozen timing marks, well under 64 KiB, and the figures a
// Python payload left (at most MaxFigureBytes, in base64: 4/3 of it, with
// their quotes and commas). The reader grows its buffer only as the line
// does (readFrame).
const maxStatusLine = 256<<10 + (MaxFigureBytes+2)/3*4 + maxFigures*4

// maxStatusMarks bounds the timing marks of one status line (the init
// has a few dozen steps).
const maxStatusMarks = 1024

// errStatusFraming is wrapped by every error of the status stream's
// framing or decoding: the init never sends such a line, so one means the
// stream cannot be trusted any more and the run is ended (issue 11,
// finding 2).
var errStatusFraming = errors.New("status pipe")

// decodeStatus decodes one status line (its '\n' included or not) and
// checks it is a message the init sends: one JSON object of known fields
// and kind, within the bounds above. It is pure, for the fuzzer.
func decodeStatus(line []byte) (StatusMsg, error) {
	var m StatusMsg
	if len(line) > maxStatusLine {
		return m, fmt.Errorf("%w: line of %d bytes, longer than %d", errStatusFraming, len(line), maxStatusLine)
	}
	if err := decodeStrict(line, &m); err != nil {
		return StatusMsg{}, fmt.Errorf("%w: %v", errStatusFraming, err)
	}
	switch m.Kind {
	case kindError, kindReady, kindStarted, kindExit, kindWarning:
	default:
		return StatusMsg{}, fmt.Errorf("%w: message of unknown kind %.64q", errStatusFraming, m.Kind)
	}
	if len(m.Denials) > maxDenialKinds || len(m.Marks) > maxStatusMarks || m.DenialsOther < 0 || len(m.Figures) > maxFigures {
		return StatusMsg{}, fmt.Errorf("%w: %s message past its bounds (%d denial kinds, %d marks, %d figures)", errStatusFraming, m.Kind, len(m.Denials), len(m.Marks), len(m.Figures))
	}
	return m, nil
}

// decodeStrict decodes line (its '\n' included or not) into v: one JSON
// object of v's fields only (DisallowUnknownFields, at every depth) and
// nothing after it. Both pipes' messages go through it.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad message %.64q: %v", line, err)
	}
	if dec.More() {
		return fmt.Errorf("bad message %.64q: data after the object", line)
	}
	return nil
}

// errFrameTooBig is wrapped by readFrame's error for a line past its cap.
var errFrameTooBig = errors.New("frame too big")

// readStatusLine reads one status line: readFrame, with a line past max a
// framing error of the status pipe.
func readStatusLine(br *bufio.Reader, max int) ([]byte, error) {
	line, err := readFrame(br, max)
	if errors.Is(err, errFrameTooBig) {
		return nil, fmt.Errorf("%w: %v", errStatusFraming, err)
	}
	return line, err
}

// readFrame reads one '\n'-terminated line of at most max bytes (newline
// excluded). A clean EOF before any byte is io.EOF; a line cut by EOF is
// io.ErrUnexpectedEOF (the writer died while writing); a longer line is
// errFrameTooBig, found without buffering more than max bytes.
func readFrame(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errFrameTooBig, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) == 0:
			return nil, io.EOF
		case errors.Is(err, io.EOF):
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
