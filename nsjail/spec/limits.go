package spec

// What enforced a limit, in the Result's limits.
const (
	ByCgroup2    = "cgroup2"
	ByCgroup1    = "cgroup1"
	ByRlimit     = "rlimit"
	ByTmpfs      = "tmpfs"
	BySupervisor = "supervisor" // sbx's own timers and output capture
	ByUserNS     = "userns"     // a /proc/sys/user quota of the sandbox's user namespace
	ByNone       = "none"
)

// LimitInfo is one entry of the Result's limits: what was asked, in a
// base unit, and what enforced it. Never a limit that nothing enforced
// under another name: those say "none".
type LimitInfo struct {
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"` // bytes, count, cpus, ms
	EnforcedBy string  `json:"enforced_by"`
	Note       string  `json:"note,omitempty"`
	// AtKill is what sbx measured, in Unit, when it ended the run for
	// this limit (cpu_time: the total CPU at the poll that passed it);
	// absent when the limit did not end the run.
	AtKill float64 `json:"at_kill,omitempty"`
}
