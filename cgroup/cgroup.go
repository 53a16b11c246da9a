package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is how a Group enforces limits.
type Mode string

const (
	ModeV2   Mode = "cgroup2"
	ModeV1   Mode = "cgroup1"
	ModeNone Mode = "none"
)

// ErrUnavailable means sbx cannot create a cgroup from where it runs
// (unprivileged and not in a delegated cgroup, or no usable hierarchy).
// The caller falls back to rlimits and says so in the Result.
var ErrUnavailable = errors.New("no writable cgroup")

// Limits for one sandbox; a zero field means no limit of that kind.
type Limits struct {
	MemoryBytes int64   // memory.max / memory.limit_in_bytes, swap forbidden
	Pids        int64   // pids.max: tasks, i.e. threads, not processes
	CPUs        float64 // CPU bandwidth in CPUs (0.5 = half of one CPU)
}

// Limit kinds, the keys of Enforced and Unenforced.
const (
	KindMemory = "memory"
	KindPids   = "pids"
	KindCPUs   = "cpus"
)

// cpuPeriodUS is the CFS bandwidth period sbx uses, the kernel's default
// (Documentation/scheduler/sched-bwc.rst): 100 ms.
const cpuPeriodUS = 100000

// minCPUs follows from the kernel's minimum quota of 1 ms per period
// (sched-bwc.rst: "The minimum quota allowed for the quota or period is 1ms").
const minCPUs = 1000.0 / cpuPeriodUS

func (l Limits) validate() error {
	var errs []error
	if l.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("memory limit %d: negative", l.MemoryBytes))
	}
	if l.Pids < 0 {
		errs = append(errs, fmt.Errorf("pids limit %d: negative", l.Pids))
	}
	if math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) || l.CPUs < 0 {
		errs = append(errs, fmt.Errorf("cpus limit %v: not a non-negative number", l.CPUs))
	} else if l.CPUs > 0 && l.CPUs < minCPUs {
		errs = append(errs, fmt.Errorf("cpus limit %v: below the kernel's minimum %v (1 ms of quota per 100 ms period)", l.CPUs, minCPUs))
	}
	return errors.Join(errs...)
}

// cpuQuotaUS converts CPUs to a CFS quota in µs per cpuPeriodUS.
func cpuQuotaUS(cpus float64) int64 {
	return int64(math.Round(cpus * cpuPeriodUS))
}

// checkID keeps the cgroup name a single, unreserved path element.
func checkID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("cgroup id %q: must be 1 to 128 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("cgroup id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	if id == "." || id == ".." {
		return fmt.Errorf("cgroup id %q: not a name", id)
	}
	if strings.HasPrefix("sbx-"+id, supervisorPrefix) {
		return fmt.Errorf("cgroup id %q: the prefix %q is reserved for sbx's own leaf cgroup", id, strings.TrimPrefix(supervisorPrefix, "sbx-"))
	}
	return nil
}

// Probe reports which mode sbx can use from where it runs and which
// controllers it can use there, without creating or moving anything. err
// is non-nil exactly when the mode is ModeNone, says why, and wraps
// ErrUnavailable (or is a failure to read /proc).
//
// On v2 a controller is listed when the parent has delegated it (it is in
// cgroup.controllers) and it is either enabled in sbx's cgroup already or
// sbx may enable it (cgroup.subtree_control is writable). New may still
// fail to enable it when the cgroup holds processes other than sbx (see
// doc.go); Group.Unenforced then says so.
func Probe() (Mode, []string, error) {
	l, err := currentLayout()
	if err != nil {
		return ModeNone, nil, err
	}
	switch l.mode {
	case ModeV2:
		sc := filepath.Join(l.v2.base, "cgroup.subtree_control")
		enabled, _ := readFile(sc)
		canEnable := unix.Faccessat(unix.AT_FDCWD, sc, unix.W_OK, unix.AT_EACCESS) == nil
		var out []string
		for _, c := range l.v2Avail {
			if canEnable || slices.Contains(strings.Fields(string(enabled)), c) {
				out = append(out, c)
			}
		}
		return ModeV2, out, nil
	case ModeV1:
		return ModeV1, l.knownControllers(), nil
	}
	return ModeNone, nil, l.why
}

// Group is one sandbox's cgroup: a directory sbx-<id> below sbx's own
// cgroup, in the v2 hierarchy or in each v1 hierarchy sbx uses.
//
// Methods may be called from several goroutines (a watchdog polling
// CPUUsage while another goroutine calls Kill); Destroy waits for them.
type Group struct {
	mode Mode
	dirs []*cgDir // v2: one; v1: one per hierarchy

	enforced   map[string]Mode
	unenforced map[string]error

	mu        sync.RWMutex // RLock: readers of fds; Lock: Destroy
	cpuFD     int          // v2 cpu.stat, v1 cpuacct.usage; -1 if none
	destroyed bool
}

// cgDir is one directory of a Group. fd is held open with flock(LOCK_EX)
// for the Group's life: it tells CleanupStale of any sbx process that the
// cgroup is in use even while it is still empty (see stale.go).
type cgDir struct {
	path        string
	controllers []string // v1: the controllers of its hierarchy
	fd          int
	// v1 only, for JoinThread and LeaveThread (thread.go): this
	// directory's tasks file and the one of sbx's own cgroup in the same
	// hierarchy (the parent), opened by New, and that cgroup's path as
	// /proc/self/cgroup names it. -1 when not open.
	tasksFD, homeTasksFD int
	homeCgroup           string
	openErr              error // why they are not open
}

// New creates the sandbox's cgroup sbx-<id> below sbx's own cgroup and
// applies the limits (see doc.go for each mode). A limit whose controller
// is not available is not an error: it is missing from Enforced and
// Unenforced says why, and the caller must enforce it otherwise. When no
// cgroup can be created at all, the error wraps ErrUnavailable.
func New(id string, l Limits) (*Group, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	lay, err := currentLayout()
	if err != nil {
		return nil, err
	}
	switch lay.mode {
	case ModeV2:
		return newV2(lay, id, l)
	case ModeV1:
		return newV1(lay, id, l)
	}
	return nil, lay.why
}

func newGroup(mode Mode) *Group {
	return &Group{mode: mode, cpuFD: -1, enforced: map[string]Mode{}, unenforced: map[string]error{}}
}

// Mode is the hierarchy the Group lives in.
func (g *Group) Mode() Mode { return g.mode }

// Enforced says which of "memory", "pids" and "cpus" this Group enforces:
// only kinds whose limit was nonzero and written to the kernel.
func (g *Group) Enforced() map[string]Mode { return maps.Clone(g.enforced) }

// Unenforced says, for each nonzero limit that the Group does not enforce,
// why not (controller not delegated, not mounted, could not be enabled).
func (g *Group) Unenforced() map[string]error { return maps.Clone(g.unenforced) }

// Paths lists the Group's directories (one on v2, one per hierarchy on v1).
func (g *Group) Paths() []string {
	out := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		out[i] = d.path
	}
	return out
}

// dirFor returns the directory holding a controller's files.
func (g *Group) dirFor(controller string) (string, bool) {
	if d, ok := g.dirOf(controller); ok {
		return d.path, true
	}
	return "", false
}

// dirOf returns the cgDir holding a controller's files.
func (g *Group) dirOf(controller string) (*cgDir, bool) {
	for _, d := range g.dirs {
		if g.mode == ModeV2 || slices.Contains(d.controllers, controller) {
			return d, true
		}
	}
	return nil, false
}

// FD returns a directory fd of the v2 cgroup for SysProcAttr.UseCgroupFD /
// CgroupFD (clone3 CLONE_INTO_CGROUP, Linux 5.7): the child is born in the
// cgroup, with no attach cost and no window outside it. ok=false on v1.
// The fd is O_RDONLY|O_DIRECTORY rather than O_PATH because it also holds
// the Group's flock; the kernel accepts either. It stays valid until
// Destroy.
func (g *Group) FD() (fd int, ok bool) {
	if g.mode != ModeV2 || len(g.dirs) == 0 {
		return -1, false
	}
	return g.dirs[0].fd, true
}

// Attach moves pid (the whole process, all its threads) into the Group:
// into every hierarchy on v1, into cgroup.procs on v2. Processes it forks
// afterwards are born inside; memory it charged before stays charged
// where it was (cgroup-v2.rst "Memory Ownership"; v1 move_charge is off).
func (g *Group) Attach(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("attach pid %d: not a pid", pid)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return fmt.Errorf("attach pid %d: cgroup already destroyed", pid)
	}
	v := fmt.Sprint(pid)
	for _, d := range g.dirs {
		if err := writeFile(filepath.Join(d.path, "cgroup.procs"), v); err != nil {
			return err
		}
	}
	return nil
}

// CPUUsage returns the CPU time (user+system) used so far by every process
// that ever ran in the Group. It preads a file kept open since New (one
// syscall, no allocation), so polling it every 10 ms is cheap.
func (g *Group) CPUUsage() (time.Duration, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return 0, errors.New("cpu usage: cgroup already destroyed")
	}
	return g.cpuUsage()
}

// cpuUsage is CPUUsage with g.mu held.
func (g *Group) cpuUsage() (time.Duration, error) {
	if g.cpuFD < 0 {
		return 0, errors.New("cpu usage: no cpuacct hierarchy is mounted for this cgroup")
	}
	var buf [64]byte
	n, err := unix.Pread(g.cpuFD, buf[:], 0)
	if err != nil {
		return 0, fmt.Errorf("cpu usage: pread %s: %w", g.cpuFile(), err)
	}
	if g.mode == ModeV2 {
		// "usage_usec N" is the first line of cpu.stat (cgroup-v2.rst, "CPU
		// Interface Files"); 64 bytes always hold it.
		v, ok := keyValue(buf[:n], "usage_usec")
		if !ok {
			return 0, fmt.Errorf("cpu usage: parse %s: no usage_usec in %q", g.cpuFile(), buf[:n])
		}
		return time.Duration(v) * time.Microsecond, nil
	}
	v, err := parseUint(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("cpu usage: parse %s: %w", g.cpuFile(), err)
	}
	return time.Duration(v), nil // cpuacct.usage is in ns (cgroup-v1/cpuacct.rst)
}

func (g *Group) cpuFile() string {
	if g.mode == ModeV2 {
		d, _ := g.dirFor("cpu")
		return filepath.Join(d, "cpu.stat")
	}
	d, _ := g.dirFor("cpuacct")
	return filepath.Join(d, "cpuacct.usage")
}

func parseUint(b []byte) (int64, error) {
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	if i == 0 || (i < len(b) && b[i] != '\n') {
		return 0, fmt.Errorf("%q is not an integer", b)
	}
	return v, nil
}

// Stats is what the kernel says about a Group's processes. Fields the
// kernel does not provide here are 0 (see the field comments).
type Stats struct {
	UserCPU, SystemCPU time.Duration
	// PeakMemoryBytes: v2 memory.peak (Linux 5.19), v1
	// memory.max_usage_in_bytes; 0 when the memory controller is not in use.
	PeakMemoryBytes int64
	PidsPeak        int64 // pids.peak (v2 and v1 on Linux 6.1+); 0 if unknown
	// OOMKills: processes the OOM killer killed in the Group; v2
	// memory.events oom_kill, v1 memory.oom_control oom_kill (Linux 4.13).
	OOMKills int64
	// PidsMaxEvents: forks refused because pids.max was reached (pids.events
	// max). The pids controller never kills: the fork fails with EAGAIN.
	PidsMaxEvents int64
	// There is no count of the memory limit's hits (v1 memory.failcnt
	// and memory.memsw.failcnt, v2 memory.events max): nothing in the
	// Result uses it, it is two more reads per run on v1, and on v1 with
	// swap accounting recent kernels (6.18) count 0 even after an OOM
	// kill (the memsw limit is hit first and only the memory counter
	// counts failures: mm/memcontrol.c track_failcnt). Memory kills are
	// classified by OOMKills.
}

// Stats reads the Group's accounting. It costs a handful of small reads
// (tens of µs); call it once the run is over, or as often as needed.
func (g *Group) Stats() (Stats, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return Stats{}, errors.New("stats: cgroup already destroyed")
	}
	if g.mode == ModeV2 {
		return g.statsV2()
	}
	return g.statsV1()
}
