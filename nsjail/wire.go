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
)

// initArg is argv[1] of the re-executed binary that makes it the init.
const initArg = "__sbx_init"

// Control is a message from the supervisor after the Payload.
type Control struct {
	// Signal asks the init to forward this signal to the payload.
	Signal int `json:"signal,omitempty"`
	// Kill asks the init to kill every process of the sandbox but
	// itself, then report as usual (the workspace included).
	Kill bool `json:"kill,omitempty"`
}

// Status kinds sent by the init.
const (
	kindError   = "error"   // a setup step failed: Step, Path, Errno, Msg
	kindReady   = "ready"   // the sandbox is built, waiting for the payload
	kindStarted = "started" // the payload runs as Pid (in the sandbox's pid ns)
	kindExit    = "exit"    // the payload ended: WaitStatus, Rusage, or ExecErrno
	kindWarning = "warning" // something after the payload went wrong: Msg
)

// StatusMsg is one line from the init on fd 4.
type StatusMsg struct {
	Kind  string `json:"kind"`
	Step  string `json:"step,omitempty"`
	Path  string `json:"path,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Msg   string `json:"msg,omitempty"`
	Pid   int    `json:"pid,omitempty"`
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
	// filter: a call through another ABI (seccomp_linux.go).
	FilterKilled bool `json:"filter_killed,omitempty"`
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
// each) and a few dozen timing marks, well under 64 KiB.
const maxStatusLine = 256 << 10

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
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return StatusMsg{}, fmt.Errorf("%w: bad message %.64q: %v", errStatusFraming, line, err)
	}
	if dec.More() {
		return StatusMsg{}, fmt.Errorf("%w: bad message %.64q: data after the object", errStatusFraming, line)
	}
	switch m.Kind {
	case kindError, kindReady, kindStarted, kindExit, kindWarning:
	default:
		return StatusMsg{}, fmt.Errorf("%w: message of unknown kind %.64q", errStatusFraming, m.Kind)
	}
	if len(m.Denials) > maxDenialKinds || len(m.Marks) > maxStatusMarks || m.DenialsOther < 0 {
		return StatusMsg{}, fmt.Errorf("%w: %s message past its bounds (%d denial kinds, %d marks)", errStatusFraming, m.Kind, len(m.Denials), len(m.Marks))
	}
	return m, nil
}

// readStatusLine reads one '\n'-terminated line of at most max bytes
// (newline excluded). A clean EOF before any byte is io.EOF; a line cut
// by EOF is io.ErrUnexpectedEOF (the init died while writing); a longer
// line is a framing error, found without buffering more than max bytes.
func readStatusLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errStatusFraming, max)
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
