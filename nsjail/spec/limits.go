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
	// Evidence names what told sbx that this limit was reached, when it
	// judged it was (absent otherwise; added after at_kill). Its values
	// and what each can and cannot prove: DESIGN.md, "What each mode can
	// tell".
	Evidence Evidence `json:"evidence,omitempty"`
}

// Evidence is what showed that a limit was reached (LimitInfo.Evidence).
// Under a cgroup it is the kernel's own count; under rlimits the kernel
// keeps none, and sbx says what it did see (issue 19, point 1).
type Evidence string

const (
	// EvidenceOOMKill: the cgroup's OOM kill count (memory.events
	// oom_kill on v2, memory.oom_control on v1) rose and the payload died
	// of SIGKILL. Kernel evidence.
	EvidenceOOMKill Evidence = "oom_kill"
	// EvidencePidsEvents: the cgroup's pids.events "max" counted refused
	// forks. Kernel evidence.
	EvidencePidsEvents Evidence = "pids_events"
	// EvidenceMemoryError: the payload exited with status 1 and the last
	// line of its stderr is Python's report of an uncaught MemoryError
	// (the interpreter's answer to the ENOMEM of a refused mmap or brk):
	// under RLIMIT_DATA, or under a cgroup for a request larger than the
	// host's RAM and swap (memoryErrorAtLimit). Payload-visible: a payload
	// can print it itself, and then misreports only its own run
	// (DESIGN.md).
	EvidenceMemoryError Evidence = "python_memory_error"
	// EvidenceTasksSampled: under RLIMIT_NPROC, a count of the sandbox's
	// tasks (the poll's, or the init's when the payload ended) reached
	// the limit, where the kernel refuses every further fork and thread
	// with EAGAIN (fork(2)). Kernel figures, sampled: a peak between two
	// samples is missed.
	EvidenceTasksSampled Evidence = "tasks_sampled"
)
