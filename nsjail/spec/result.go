package spec

import "time"

// Status is how a run ended; the values are the public contract of the
// Result (DESIGN.md, "Contracts").
type Status string

const (
	StatusOK          Status = "ok"
	StatusExit        Status = "exit"
	StatusSignal      Status = "signal"
	StatusTimeout     Status = "timeout"
	StatusCPULimit    Status = "cpu_limit"
	StatusMemoryLimit Status = "memory_limit"
	StatusPidsLimit   Status = "pids_limit"
	StatusOutputLimit Status = "output_limit"
	StatusSeccomp     Status = "seccomp"
	StatusSetupError  Status = "setup_error"
	// StatusNotFound and StatusCannotExec: the payload never ran, its
	// execve failed with ENOENT (127) or another errno (126), as a
	// shell's exit codes say; "exit" would blame the payload for it.
	StatusNotFound   Status = "not_found"
	StatusCannotExec Status = "cannot_exec"
	// StatusCanceled: the caller ended the run before the payload did: a
	// server's client went away, DELETE /v1/jobs/{id}, or a drain past
	// its --drain-timeout. Not the payload's doing, nor a failure to build
	// the sandbox; exit code 125, as sbx did not finish the run.
	StatusCanceled Status = "canceled"
)

// Exit codes of `sbx exec` besides the payload's own (DESIGN.md).
const (
	ExitTimeLimit  = 124 // wall clock or CPU time
	ExitSbxFailed  = 125 // bad flag, bad profile, setup error
	ExitCannotExec = 126
	ExitNotFound   = 127
	ExitKilled     = 137 // memory or another limit
)

// ImageInfo names an image of sbx's store: the name it was asked for,
// its id (the config's digest: one id is one tree) and its manifest's
// digest (what a registry reference @sha256:... names).
type ImageInfo struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Digest string `json:"digest"`
}

// Interpreter names a python3: its path inside the sandbox's root, and
// its version ("3.11.2").
type Interpreter struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Result is the one JSON object `sbx exec --json` prints.
type Result struct {
	ID      string `json:"id"`
	Profile string `json:"profile"`
	// Image names the OCI image the run's root came from (absent on the
	// host's /usr or a --rootfs directory).
	Image *ImageInfo `json:"image,omitempty"`
	// Interpreter is the python3 a Python payload ran with: its path
	// inside and its version (on an image, as a sandbox on it found them
	// when it was stored; else the major.minor of its file name).
	Interpreter *Interpreter `json:"interpreter,omitempty"`
	// Version and Commit say which sbx made the Result (internal/version).
	Version    string    `json:"version"`
	Commit     string    `json:"commit"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Status     Status    `json:"status"`
	ExitCode   int       `json:"exit_code"`
	// Signal is the name of the signal that ended the payload, or null.
	Signal          *string `json:"signal"`
	Message         string  `json:"message"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StderrBytes     int64   `json:"stderr_bytes"`
	Usage           Usage   `json:"usage"`
	// Limits says, for each limit of the run, its value and what enforced
	// it (cgroup2, cgroup1, rlimit, tmpfs, supervisor, or none).
	Limits map[string]LimitInfo `json:"limits"`
	// Layers says what each layer of the sandbox was: on, degraded (weaker
	// than asked) or off.
	Layers map[string]Layer `json:"layers"`
	// PidsLimitHit: forks were refused at the pids limit during the run,
	// whatever ended it.
	PidsLimitHit bool `json:"pids_limit_hit"`
	// Pooled: the run took a sandbox a warm pool had started ahead of it
	// (sbx serve --pool); absent when it ran cold.
	Pooled bool `json:"pooled,omitempty"`
	// Inputs are the files streamed into the workspace, hashed as they
	// crossed.
	Inputs []InputEntry `json:"inputs"`
	// Files are the workspace entries the run created, modified or
	// deleted (never empty-null: [] when none).
	Files          []FileEntry `json:"files"`
	FilesTruncated bool        `json:"files_truncated"`
	// FilesTruncatedReason says what cut the listing short when
	// FilesTruncated: max_files, max_hash_bytes, walk_timeout or
	// transfer_failed (added after files_truncated: absent when false).
	FilesTruncatedReason Truncation `json:"files_truncated_reason,omitempty"`
	// Network lists every connection attempt through the proxy, allowed
	// or not ([] without network).
	Network []Attempt `json:"network"`
	// NetworkTruncated: network does not list every attempt (the record
	// log's caps, or the proxy's refusal rate limit); network_summary
	// counts them all.
	NetworkTruncated bool `json:"network_truncated"`
	// NetworkSummary counts the attempts through the proxy, listed or
	// not; null without network.
	NetworkSummary *Summary `json:"network_summary"`
	// SeccompDenials are the syscalls the filter refused, most frequent
	// first, then DenialOther if there were too many distinct ones to
	// name; null when there was no filter or the kernel could not tell.
	SeccompDenials []Denial `json:"seccomp_denials"`
	// Error is the uncaught exception a Python payload died of (name,
	// value, its frames), captured in-process by the interpreter's runner
	// (nsjail/warm_driver.py), not parsed from stderr; absent otherwise.
	Error *PyError `json:"error,omitempty"`
	// Results are the matplotlib figures a Python payload left open or
	// plt.show()ed, each a MIME bundle with its png (base64), when the
	// profile asks for them (capture_figures); rendered in-process by the
	// runner (Agg), never parsed from the output. Absent when none.
	Results []MIMEBundle `json:"results,omitempty"`
	// ResultsTruncated: some figures were left out (the output cap, or
	// MaxFigures), or one was not a well-formed PNG; a warning says which.
	ResultsTruncated bool `json:"results_truncated,omitempty"`
	// Warnings are things that went wrong without failing the run.
	Warnings []string `json:"warnings,omitempty"`
}

// FillEmpty turns the nil lists and maps a step may have left (a failed
// collection, a cut-short run) back into [] and {}: a Result of any status
// has the same shape (issue 19, point 2). The fields whose null
// means something (signal, network_summary, seccomp_denials) are not
// touched; see DESIGN.md, "Result".
func (r *Result) FillEmpty() {
	if r.Files == nil {
		r.Files = []FileEntry{}
	}
	if r.Inputs == nil {
		r.Inputs = []InputEntry{}
	}
	if r.Network == nil {
		r.Network = []Attempt{}
	}
	if r.Limits == nil {
		r.Limits = map[string]LimitInfo{}
	}
	if r.Layers == nil {
		r.Layers = map[string]Layer{}
	}
}

// DenialOther is the Syscall of the Denial that counts together the calls
// of every syscall past the first few hundred distinct ones (a payload
// can make calls with millions of numbers).
const DenialOther = "(other)"

// Denial counts the refusals of one syscall, or of all the others
// (DenialOther).
type Denial struct {
	Syscall string `json:"syscall"`
	Count   int    `json:"count"`
}

// InputEntry is one file streamed into the workspace.
type InputEntry struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Usage is what the run consumed.
type Usage struct {
	WallMS int64 `json:"wall_ms"`
	// CPUMS is user+system time of every process of the payload: from
	// the cgroup's counters (ns or µs) when there is one, else from the
	// rusage (µs) of the children the init reaped.
	CPUMS           int64 `json:"cpu_ms"`
	UserMS          int64 `json:"user_ms"`
	SystemMS        int64 `json:"system_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// PidsPeak is the most tasks (threads included) the sandbox held at
	// once: exact where the cgroup tells (pids.peak), else the most that
	// sbx sampled; null when neither is known (issue 19, point 1: never
	// 0 for unknown). PidsPeakSource says which.
	PidsPeak *int64 `json:"pids_peak"`
	// PidsPeakSource is PidsPeakCgroup or PidsPeakSampled; absent when
	// pids_peak is null (added after pids_peak).
	PidsPeakSource string `json:"pids_peak_source,omitempty"`
}

// Where usage.pids_peak comes from.
const (
	// PidsPeakCgroup: the cgroup's pids.peak (v2; v1 on Linux 6.1+),
	// the exact high-water mark.
	PidsPeakCgroup = "cgroup"
	// PidsPeakSampled: the most tasks counted by the CPU poll (every
	// cpuTotalPoll, rlimit mode) and by the init when the payload ended
	// (init_tasks_linux.go). A lower bound: a peak between two samples is
	// missed.
	PidsPeakSampled = "sampled"
)

// ProcessExitCode maps a Result onto the exit status of `sbx exec` (DESIGN.md).
func (r *Result) ProcessExitCode() int {
	switch r.Status {
	case StatusOK:
		return 0
	case StatusExit:
		return r.ExitCode
	case StatusSignal:
		return r.ExitCode
	case StatusNotFound:
		return ExitNotFound
	case StatusCannotExec:
		return ExitCannotExec
	case StatusTimeout, StatusCPULimit:
		return ExitTimeLimit
	case StatusMemoryLimit, StatusPidsLimit, StatusOutputLimit, StatusSeccomp:
		return ExitKilled
	default:
		return ExitSbxFailed
	}
}
