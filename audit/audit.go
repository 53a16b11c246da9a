// Package audit appends one JSON line per run to an audit log: who ran
// what, under which profile, with which inputs, what it was allowed and
// what enforced it, what it used, how it ended, and what files it left.
// A line that cannot be written makes the run fail, so that no run goes
// unrecorded.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/oserr"
	"github.com/sbx-sandbox/sbx/nsjail/spec"
)

// Entry is one line of the log. Output is included only when asked.
type Entry struct {
	// ID is the Result's id, under the Result's name (it was run_id
	// before issue 19, point 5).
	ID          string    `json:"id"`
	Version     string    `json:"version"`
	Commit      string    `json:"commit"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	InvokingUID int       `json:"invoking_uid"`
	Profile     string    `json:"profile"`
	// Image is the Result's: the OCI image the root came from.
	Image         *spec.ImageInfo   `json:"image,omitempty"`
	Interpreter   *spec.Interpreter `json:"interpreter,omitempty"`
	ProfileSHA256 string            `json:"profile_sha256"`
	// CodeSHA256 hashes what was run: the script's bytes, the -c code,
	// or the command line of `-- CMD ARGS`.
	CodeSHA256 string            `json:"code_sha256"`
	Argv       []string          `json:"argv"`
	Inputs     []spec.InputEntry `json:"inputs"`
	Limits     any               `json:"limits,omitempty"`
	Usage      spec.Usage        `json:"usage"`
	Status     spec.Status       `json:"status"`
	ExitCode   int               `json:"exit_code"`
	Signal     *string           `json:"signal"`
	Message    string            `json:"message"`
	Files      []spec.FileEntry  `json:"files"`
	Network    []spec.Attempt    `json:"network"`
	Denials    []spec.Denial     `json:"seccomp_denials"`
	Stdout     *string           `json:"stdout,omitempty"`
	Stderr     *string           `json:"stderr,omitempty"`
	Output     OutputCounts      `json:"output"`

	// NetworkTruncated and NetworkSummary are the Result's: whether
	// network lists every attempt, and the counts of all of them.
	NetworkTruncated bool          `json:"network_truncated"`
	NetworkSummary   *spec.Summary `json:"network_summary"`

	// RequestID, Token and Metadata say who asked, for a run of sbx
	// serve: its request id, the name of the bearer token (never the
	// token), and the request's free-form metadata object as sent.
	RequestID string          `json:"request_id,omitempty"`
	Token     string          `json:"token,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// OutputCounts says how much the payload printed, even when the output
// itself is not logged.
type OutputCounts struct {
	StdoutBytes     int64 `json:"stdout_bytes"`
	StderrBytes     int64 `json:"stderr_bytes"`
	StdoutTruncated bool  `json:"stdout_truncated"`
	StderrTruncated bool  `json:"stderr_truncated"`
}

// Log is an open audit log.
type Log struct {
	f    *os.File
	path string
}

// Open opens (creating, mode 0600) the log for appending. It is opened
// before the run starts, so that a log that cannot be written stops the
// run before any payload does.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit-log %s: %w", path, oserr.WithoutPath(err))
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("--audit-log %s: not a regular file", path)
	}
	return &Log{f: f, path: path}, nil
}

// Write appends e as one line with a single write(2) under an exclusive
// flock (concurrent sbx runs may share a log), then fsyncs it.
func (l *Log) Write(e *Entry) error {
	line, err := encode(e)
	if err != nil {
		return fmt.Errorf("audit log %s: encode: %w", l.path, err)
	}
	if err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("audit log %s: flock: %w", l.path, err)
	}
	defer unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	if _, err := l.f.Write(line); err != nil {
		return fmt.Errorf("audit log %s: write: %w", l.path, oserr.WithoutPath(err))
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit log %s: fsync: %w", l.path, oserr.WithoutPath(err))
	}
	return nil
}

// encode is e as one JSON line. HTML escaping is off: json.Marshal turns
// each & < > of a payload's strings into six bytes (\u0026), which no
// reader of the log needs (issue 11, finding 1). Encoder.Encode ends the
// line with '\n'; JSON strings never hold a raw newline.
func encode(e *Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Close closes the log.
func (l *Log) Close() error { return l.f.Close() }

// FromResult fills an entry from a run's Result; withOutput adds stdout
// and stderr.
func FromResult(res *spec.Result, withOutput bool) *Entry {
	e := &Entry{
		ID: res.ID, Version: res.Version, Commit: res.Commit, StartedAt: res.StartedAt, FinishedAt: res.FinishedAt, InvokingUID: os.Getuid(),
		Profile: res.Profile, Image: res.Image, Interpreter: res.Interpreter, Inputs: res.Inputs, Usage: res.Usage, Status: res.Status,
		ExitCode: res.ExitCode, Signal: res.Signal, Message: res.Message, Files: res.Files,
		Network: res.Network, Denials: res.SeccompDenials,
		NetworkTruncated: res.NetworkTruncated, NetworkSummary: res.NetworkSummary,
	}
	if e.Inputs == nil {
		e.Inputs = []spec.InputEntry{}
	}
	if e.Files == nil {
		e.Files = []spec.FileEntry{}
	}
	if withOutput {
		e.Stdout, e.Stderr = &res.Stdout, &res.Stderr
	}
	e.Output = OutputCounts{StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
	return e
}
