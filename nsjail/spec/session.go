package spec

// The session contract (issue 15): one Execution per cell, with E2B's
// names, so that a client written for E2B's code interpreter maps onto it.

// ExecStatus is how a cell ended.
type ExecStatus string

const (
	// ExecOK: the cell ran to its end.
	ExecOK ExecStatus = "ok"
	// ExecError: it raised; Error says what.
	ExecError ExecStatus = "error"
	// ExecTimeout: it passed its timeout. It was interrupted (SIGINT,
	// KeyboardInterrupt, state kept), or, when it did not yield within
	// the grace, its interpreter was killed (StateLost).
	ExecTimeout ExecStatus = "timeout"
	// ExecInterrupted: the client interrupted it.
	ExecInterrupted ExecStatus = "interrupted"
	// ExecKilled: its interpreter died under it (a memory or pids
	// limit, a signal, os._exit) and was restarted (StateLost).
	ExecKilled ExecStatus = "killed"
	// ExecSessionEnded: the session's sandbox is gone (its TTL, its CPU
	// limit, a kill); the session is over.
	ExecSessionEnded ExecStatus = "session_ended"
)

// Execution is what one cell of a session did.
type Execution struct {
	ExecutionCount int        `json:"execution_count"`
	Status         ExecStatus `json:"status"`
	// Stdout and Stderr are the cell's, capped (head and tail) like a
	// Result's; the Bytes count everything it wrote.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	// Logs are the output in the order it came, tagged by stream, with
	// when it was read; capped in count and bytes (LogsTruncated).
	Logs          []LogChunk `json:"logs"`
	LogsTruncated bool       `json:"logs_truncated,omitempty"`
	// Results are the last expression's value (IsMainResult) and every
	// display() and open figure, in order.
	Results          []MIMEBundle `json:"results"`
	ResultsTruncated bool         `json:"results_truncated,omitempty"`
	// ResultsTruncatedReason says what cut the results when
	// ResultsTruncated: the cell's in-flight cap, or a file a large item
	// could not be written to (added after results_truncated: absent
	// when false).
	ResultsTruncatedReason string   `json:"results_truncated_reason,omitempty"`
	Error                  *PyError `json:"error"`
	// StateLost: the interpreter was restarted during this cell, or
	// since the last one: its globals are gone, the workspace is not.
	StateLost bool `json:"state_lost"`
	// Limit names the sandbox limit the cell ran into, from the cgroup's
	// counts during it: "memory" (the OOM killer killed a process of the
	// session, or without a cgroup the cell raised MemoryError) or "pids"
	// (the cgroup refused a fork); absent when none.
	Limit string    `json:"limit,omitempty"`
	Usage ExecUsage `json:"usage"`
	// Message says why, for anything but ok and error.
	Message string `json:"message,omitempty"`
	// Egress is what the session's egress proxy saw during the cell, for
	// a profile with network mode "allow"; absent otherwise (added after
	// the session contract: an older client ignores it).
	Egress *CellEgress `json:"egress,omitempty"`
}

// CellEgress is one cell's share of its session's egress proxy: what a
// one-shot Result says in network, network_summary and network_truncated.
type CellEgress struct {
	// Attempts are the connections that ended during the cell, in accept
	// order, as a Result's network lists them.
	Attempts []Attempt `json:"attempts"`
	// Summary counts the cell's attempts, listed or not.
	Summary Summary `json:"summary"`
	// Truncated says that Attempts does not list every attempt.
	Truncated bool `json:"truncated"`
	// Open counts connections still open when the cell ended (a thread
	// or a kept-alive tunnel the cell left): each is listed with the cell
	// during which it ends.
	Open int `json:"open"`
}

// LogChunk is one read of a stream.
type LogChunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   string `json:"data"`
	// TMS is when it was read, in ms since the cell started.
	TMS int64 `json:"t_ms"`
}

// MIMEBundle is one value as its _repr_*_ methods render it (as IPython
// does); binary ones (png, jpeg) in base64.
type MIMEBundle struct {
	Text         string `json:"text,omitempty"`
	HTML         string `json:"html,omitempty"`
	Markdown     string `json:"markdown,omitempty"`
	SVG          string `json:"svg,omitempty"`
	PNG          string `json:"png,omitempty"`
	JPEG         string `json:"jpeg,omitempty"`
	JSON         string `json:"json,omitempty"`
	LaTeX        string `json:"latex,omitempty"`
	IsMainResult bool   `json:"is_main_result"`
	// Files are the items too large to be inline (a session's, over
	// InlineResultBytes), by their key ("html", "png", ...): each was
	// written to a file of the session's workspace, fetchable with GET
	// /v1/sessions/{id}/files?path=, and its key above is empty.
	Files map[string]ResultFile `json:"files,omitempty"`
}

// ResultFile is one result item written to a workspace file: its path
// relative to the workspace, and its size and sha256 as the supervisor
// sent them (binary items, png and jpeg, decoded from base64).
type ResultFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// InlineResultBytes is the largest result item a session's Execution
// carries inline; a larger one goes to a workspace file (ResultFile).
const InlineResultBytes = 1 << 20

// ResultsDir is the workspace directory of the result items written to
// files: ResultsDir/CELL-N.EXT, N the result's place in its cell from 1.
const ResultsDir = ".sbx/results"

// PyError is an uncaught Python exception: a session cell's, or a
// one-shot run's (Result.Error).
type PyError struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Traceback is the frames from the cell's (or script's) own down to
	// where it was raised; the driver's are left out.
	Traceback []PyFrame `json:"traceback"`
}

// PyFrame is one frame of a traceback.
type PyFrame struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Function string `json:"function"`
	Code     string `json:"code"`
}

// ExecUsage is one cell's: its wall time, and the sandbox's CPU during it
// and peak memory (the cgroup's: over the session's life, memory.peak
// cannot be reset per cell on every kernel).
type ExecUsage struct {
	WallMS          int64 `json:"wall_ms"`
	CPUMS           int64 `json:"cpu_ms"`
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
}
