package nsjail

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The total CPU of a sandbox without a cgroup (issue 21). RLIMIT_CPU is per
// process: a payload that forks gets N times its budget. The supervisor
// therefore adds up, every cpuTotalPoll, the CPU of every process of the
// sandbox from the host's /proc (proc(5)):
//
//   - the init's cutime+cstime: every process of the sandbox that has
//     ended and been reaped. Orphans reparent to the init (pid 1 of the
//     pid namespace), and a reaped process's cutime carries the CPU of the
//     children it reaped itself (wait4(2), getrusage(2) RUSAGE_CHILDREN), so
//     a process that lived and died between two polls still counts;
//   - for every live (or zombie, not yet reaped) descendant of the init:
//     its utime+stime (all its threads, the ended ones included) plus its
//     own cutime+cstime, found by walking /proc/PID/task/TID/children
//     (CONFIG_PROC_CHILDREN, Linux 3.5) from the init down.
//
// The init's own utime+stime (its Go runtime) is not the payload's and is
// left out. The tree is read top-down, parents before their children: a
// child reaped between the two reads is missed by that one poll (its time
// reaches its parent's cutime, already read), never counted twice.
//
// Known gap: a process whose SIGCHLD is SIG_IGN (or SA_NOCLDWAIT) has its
// children reaped by the kernel without a wait, and their CPU reaches no
// cutime (getrusage(2), NOTES: POSIX forbids counting them). Such children
// count while they live (each poll sees them), RLIMIT_CPU bounds each one,
// and the wall-clock limit bounds the run; a cgroup has no such gap.

// cpuTotalPoll is how often the supervisor adds up the sandbox's CPU
// without a cgroup: the limit is passed by at most this much times the
// CPUs the sandbox can use, plus one clock tick (USER_HZ, 10 ms) per
// process of rounding. 20 ms costs a few hundred µs of host CPU per poll
// for a handful of processes.
const cpuTotalPoll = 20 * time.Millisecond

// cpuWalkMax caps the processes one poll reads, so that a fork bomb cannot
// make a poll unbounded (each costs three opens or more: about 15 ms for
// 1024, see pollCPUTotal). Past it the
// poll counts what it read, the reaped processes always included, and
// warns once: live processes beyond the cap count only once they end.
const cpuWalkMax = 1024

// cpuTasksMax caps the threads of one process whose children a poll reads.
const cpuTasksMax = 256

// cpuMeter reads the total CPU of a sandbox from /proc with fixed buffers:
// a poll allocates nothing, whatever the payload does.
type cpuMeter struct {
	initPid int
	// initDir is an fd of /proc/<init pid>: it stays the init's after the
	// init is reaped (reads fail with ESRCH), so a reused pid is never read.
	initDir int
	tick    time.Duration // one clock tick (sysconf(_SC_CLK_TCK) is 100 on Linux)
	buf     [4096]byte
	dents   [8192]byte
	path    [64]byte
	tids    [cpuTasksMax]int32
	// stack holds the processes found and not yet read: pid and the
	// parent they were found under.
	stack  [cpuWalkMax][2]int32
	capped bool
	// tasks counts the threads listed by this poll (listTasks).
	tasks int
	// clock is the task-clock perf counter of the payload's tree, or -1.
	clock int
}

// cpuReading is one poll's total.
type cpuReading struct {
	total time.Duration
	procs int // processes read, the init included
	// tasks are the threads of those processes, the init's included:
	// what RLIMIT_NPROC counts (countTasks), a lower bound when capped.
	tasks  int
	capped bool // the walk stopped at cpuWalkMax
	// byClock: the task clock read more than /proc.
	byClock bool
}

// openCPUMeter opens /proc/<init pid> for the polls; clock is the task
// clock of the payload's tree (openTaskClock), or -1. The meter does not
// own it.
func openCPUMeter(initPid, clock int) (*cpuMeter, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(initPid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /proc/%d: %w", initPid, err)
	}
	// USER_HZ is 100 on every Linux architecture (the ABI of clock_t in
	// /proc and times(2)), whatever CONFIG_HZ is: sysconf(_SC_CLK_TCK).
	return &cpuMeter{initPid: initPid, initDir: fd, tick: time.Second / 100, clock: clock}, nil
}

func (m *cpuMeter) close() { unix.Close(m.initDir) }

// read adds up the sandbox's CPU once. An error means the init is gone.
func (m *cpuMeter) read() (cpuReading, error) {
	var r cpuReading
	st, err := m.readStat(m.initDir, 0, "stat")
	if err != nil {
		return r, fmt.Errorf("read /proc/%d/stat: %w", m.initPid, err)
	}
	r.total = time.Duration(st.cutime+st.cstime) * m.tick
	r.procs = 1
	m.tasks = 0
	n := m.pushChildren(0, m.initDir, 0)
	for n > 0 {
		n--
		pid, parent := int(m.stack[n][0]), int(m.stack[n][1])
		st, err := m.readStat(unix.AT_FDCWD, pid, "stat")
		if err != nil || st.ppid != parent {
			// Ended and reaped since its parent was read (its time is
			// in a cutime now, or will be next poll), or no longer that
			// parent's child.
			continue
		}
		r.total += time.Duration(st.utime+st.stime+st.cutime+st.cstime) * m.tick
		r.procs++
		if r.procs >= cpuWalkMax {
			r.capped = true
			break
		}
		n = m.pushChildren(n, unix.AT_FDCWD, pid)
	}
	r.capped = r.capped || m.capped
	m.capped = false
	r.tasks = m.tasks
	// Both are lower bounds of the truth, from different evidence: the
	// larger holds.
	if c, ok := m.readTaskClock(); ok && c > r.total {
		r.total, r.byClock = c, true
	}
	return r, nil
}

// procStat is what a poll needs of /proc/PID/stat, in clock ticks.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readStat reads /proc/<pid>/<name> (pid 0: name relative to dir) and
// parses it as /proc/PID/stat.
func (m *cpuMeter) readStat(dir, pid int, name string) (procStat, error) {
	n, err := m.readFile(dir, pid, 0, name, m.buf[:])
	if err != nil {
		return procStat{}, err
	}
	return parseStat(m.buf[:n])
}

// parseStat takes fields 4 (ppid) and 14-17 (utime, stime, cutime, cstime)
// of a /proc/PID/stat line (proc(5)). The command name, field 2, is the
// payload's choice and may hold spaces and parentheses: fields are counted
// from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var st procStat
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	if i < 0 {
		return st, fmt.Errorf("no ')' in stat line")
	}
	field := 2
	var got int
	for j := i + 1; j < len(b) && field < 17; {
		for j < len(b) && b[j] == ' ' {
			j++
		}
		field++
		k := j
		for k < len(b) && b[k] != ' ' && b[k] != '\n' {
			k++
		}
		if field == 4 || field >= 14 {
			v, ok := parseInt(b[j:k])
			if !ok {
				return st, fmt.Errorf("stat field %d %q: not a number", field, b[j:k])
			}
			switch field {
			case 4:
				st.ppid = int(v)
			case 14:
				st.utime = v
			case 15:
				st.stime = v
			case 16:
				st.cutime = v
			case 17:
				st.cstime = v
			}
			got++
		}
		j = k
	}
	if got != 5 {
		return st, fmt.Errorf("stat line has %d of the 5 fields", got)
	}
	return st, nil
}

func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// pushChildren lists the threads of pid (pid 0: the process of dir) and
// pushes the children of each onto the stack from n, returning the new
// length. A child is forked by one thread and listed under that thread's
// children only (proc(5), /proc/PID/task/TID/children), so every thread is
// read, not only the leader.
func (m *cpuMeter) pushChildren(n, dir, pid int) int {
	tids := m.listTasks(dir, pid)
	for _, tid := range tids {
		n = m.pushTaskChildren(n, dir, pid, int(tid))
		if n >= len(m.stack) {
			break
		}
	}
	return n
}

// listTasks reads the thread ids of /proc/<pid>/task, at most cpuTasksMax.
func (m *cpuMeter) listTasks(dir, pid int) []int32 {
	fd, err := m.open(dir, pid, 0, "task", unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	k := 0
	for k < len(m.tids) {
		nb, err := unix.Getdents(fd, m.dents[:])
		if err != nil || nb <= 0 {
			break
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// then the NUL-terminated name (getdents64(2)).
		for off := 0; off+19 < nb && k < len(m.tids); {
			reclen := int(*(*uint16)(unsafe.Pointer(&m.dents[off+16])))
			if reclen == 0 {
				break
			}
			name := m.dents[off+19 : off+reclen]
			end := 0
			for end < len(name) && name[end] != 0 {
				end++
			}
			if v, ok := parseInt(name[:end]); ok {
				m.tids[k] = int32(v)
				k++
			}
			off += reclen
		}
	}
	if k == len(m.tids) {
		m.capped = true
	}
	m.tasks += k
	return m.tids[:k]
}

// pushTaskChildren pushes the pids of /proc/<pid>/task/<tid>/children, a
// space-separated list read in pieces (a fork bomb's can be long).
func (m *cpuMeter) pushTaskChildren(n, dir, pid, tid int) int {
	fd, err := m.open(dir, pid, tid, "children", 0)
	if err != nil {
		return n
	}
	defer unix.Close(fd)
	var v int64
	digits := false
	for n < len(m.stack) {
		nb, err := unix.Read(fd, m.buf[:])
		if err != nil || nb <= 0 {
			break
		}
		for _, c := range m.buf[:nb] {
			if c >= '0' && c <= '9' {
				v, digits = v*10+int64(c-'0'), true
				continue
			}
			if digits {
				n = m.push(n, int32(v), pid)
			}
			v, digits = 0, false
		}
	}
	if digits {
		n = m.push(n, int32(v), pid)
	}
	return n
}

// push adds child, found under pid, to the stack at n; a full stack
// drops it and marks the poll capped.
func (m *cpuMeter) push(n int, child int32, pid int) int {
	if n >= len(m.stack) {
		m.capped = true
		return n
	}
	m.stack[n] = [2]int32{child, int32(m.parentPid(pid))}
	return n + 1
}

// parentPid is the host pid a child found under pid must report as its
// ppid (pid 0 stands for the init).
func (m *cpuMeter) parentPid(pid int) int {
	if pid == 0 {
		return m.initPid
	}
	return pid
}

// readFile reads a whole small /proc file into b.
func (m *cpuMeter) readFile(dir, pid, tid int, name string, b []byte) (int, error) {
	fd, err := m.open(dir, pid, tid, name, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	total := 0
	for total < len(b) {
		n, err := unix.Read(fd, b[total:])
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		total += n
	}
	return total, nil
}

// open opens, relative to dir, "NAME" (pid 0), "/proc/PID/NAME" (tid 0)
// or "/proc/PID/task/TID/NAME", building the path in a fixed buffer and
// calling openat(2) directly: unix.Openat would allocate it per call.
func (m *cpuMeter) open(dir, pid, tid int, name string, flags int) (int, error) {
	p := m.path[:0]
	if pid != 0 {
		p = append(p, "/proc/"...)
		p = strconv.AppendInt(p, int64(pid), 10)
		p = append(p, '/')
	}
	if tid != 0 {
		p = append(p, "task/"...)
		p = strconv.AppendInt(p, int64(tid), 10)
		p = append(p, '/')
	}
	p = append(p, name...)
	p = append(p, 0)
	if len(p) > len(m.path) {
		return -1, unix.ENAMETOOLONG
	}
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dir), uintptr(unsafe.Pointer(&p[0])),
		uintptr(unix.O_RDONLY|unix.O_CLOEXEC|flags), 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// watchCPUTotal polls the sandbox's total CPU until stop is closed, and
// sends the reading that passed limit on the returned channel. It fails
// if /proc/<init pid> cannot be opened: the limit would not hold.
func (s *supervisor) watchCPUTotal(initPid int, limit time.Duration, stop <-chan struct{}) (<-chan time.Duration, error) {
	<-s.attached // openCPUClock has run
	m, err := openCPUMeter(initPid, s.cpuClock)
	if initGone(err) {
		// The init ended, and was reaped, before its "started" was read:
		// a payload that ran to its end at once (a warm sandbox sends
		// "started" only after the handoff). With the init, the kernel
		// killed every process of its pid namespace (pid_namespaces(7)):
		// nothing is left to poll or to limit, and the Result's CPU comes
		// from the rusage as always. A nil channel never fires.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("poll the CPU time total: %w", err)
	}
	if li, ok := s.res.Limits["cpu_time"]; ok {
		li.Note = cpuTotalNote(s.cpuClock >= 0, s.cpuClockErr)
		s.res.Limits["cpu_time"] = li
	}
	var base time.Duration
	if s.job.Spec.Warm != nil {
		// A warm sandbox's total counts from the handoff (takeCPUBase).
		r, err := m.read()
		if initGone(err) {
			m.close()
			return nil, nil // as above: it ended since the open
		}
		if err != nil {
			m.close()
			return nil, fmt.Errorf("poll the CPU time total: %w", err)
		}
		base = r.total
	}
	over := make(chan time.Duration, 1)
	s.tl.mark("sbx: CPU total polled from /proc")
	go s.pollCPUTotal(m, limit, base, stop, over)
	return over, nil
}

// initGone: err says the init's /proc directory is gone (ENOENT at the
// open, ESRCH reading a directory opened before it was reaped).
func initGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
}

// pollCPUTotal reads the total every cpuTotalPoll until it passes limit,
// the init is gone, or stop is closed. A poll costs about 15 µs per
// process (measured: 3 ms for 200, BenchmarkCPUMeterRead); when one takes
// longer than half the interval, the next waits twice its time, so that
// sbx never spends more than a third of a CPU on it, however many
// processes the payload forks.
func (s *supervisor) pollCPUTotal(m *cpuMeter, limit, base time.Duration, stop <-chan struct{}, over chan<- time.Duration) {
	defer m.close()
	t := time.NewTimer(cpuTotalPoll)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		start := time.Now()
		r, err := m.read()
		if err != nil {
			return // the init is gone: the run is ending
		}
		s.sampleTasks(r.tasks)
		if r.capped && !warned {
			warned = true
			s.warn(fmt.Sprintf("the CPU time total read at most %d processes (and %d threads of each) per poll: live processes past them counted only once reaped", cpuWalkMax, cpuTasksMax))
		}
		if r.total-base >= limit {
			s.tl.mark("sbx: CPU total passed the limit")
			over <- r.total - base
			return
		}
		t.Reset(max(cpuTotalPoll, 2*time.Since(start)))
	}
}

// openTaskClock attaches a task-clock perf counter (perf_event_open(2),
// PERF_COUNT_SW_TASK_CLOCK: nanoseconds on a CPU) to the init's main
// thread, the one that forks the payload, before the payload exists. With
// inherit, every process and thread the payload makes gets a copy, and the
// kernel folds each copy's count into this one when its task exits
// (perf_event_exit_task), reaped or not: it sees what cutime cannot, the
// children of a process that ignores SIGCHLD. disabled plus enable_on_exec
// leaves the init's own time out: the init never execs, each copy starts
// counting at the payload's execve. exclude_kernel is what
// perf_event_paranoid 2 (the kernel's default) demands of an unprivileged
// caller; a task clock counts the time on a CPU all the same, system time
// included. Where perf is refused (paranoid 3, Debian's patch; no
// CONFIG_PERF_EVENTS; a seccomp profile around sbx), the /proc total
// alone holds, with its gap.
func openTaskClock(tid int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_TASK_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitDisabled | unix.PerfBitInherit | unix.PerfBitEnableOnExec | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("perf_event_open task-clock pid %d (inherit, enable_on_exec): %w", tid, err)
	}
	return fd, nil
}

// readTaskClock reads the counter: the inheriting copies' counts, live and
// exited, summed by the kernel (perf_event_read_value).
func (m *cpuMeter) readTaskClock() (time.Duration, bool) {
	if m.clock < 0 {
		return 0, false
	}
	n, err := unix.Read(m.clock, m.buf[:8])
	if err != nil || n != 8 {
		return 0, false
	}
	return time.Duration(*(*uint64)(unsafe.Pointer(&m.buf[0]))), true
}

// openCPUClock attaches the task clock for a run without a cgroup; a
// failure leaves the /proc total alone, and the Result's note says which
// held.
func (s *supervisor) openCPUClock(initPid int) {
	s.cpuClock = -1
	if s.cg != nil || s.job.Limits.CPUTime == 0 {
		return
	}
	fd, err := openTaskClock(initPid)
	if err != nil {
		s.cpuClockErr = err
		return
	}
	s.cpuClock = fd
}

// closeCPUClock, deferred in run once the init is started, closes the
// task clock once the run is over. First it raises usage.cpu_ms to the
// clock's total when that is more than the init's rusage said: every
// process has ended by then, and the clock also counted the children
// nobody waited for (user_ms and system_ms keep the rusage's proportion:
// the clock does not split them). It waits for attachInit, which opens
// the clock.
func (s *supervisor) closeCPUClock() {
	<-s.attached
	if s.cpuClock >= 0 {
		s.usageFromClock()
		unix.Close(s.cpuClock)
	}
}

// cpuTotalNote is limits.cpu_time's note without a cgroup: which evidence
// the total had (the task clock, or /proc alone and why).
func cpuTotalNote(clock bool, clockErr error) string {
	const backstop = "; RLIMIT_CPU a second later as a per-process backstop"
	poll := fmt.Sprintf("polled every %v (longer while a poll reads hundreds of processes)", cpuTotalPoll)
	if clock {
		return "total of every process, ended ones included: a task-clock perf counter inherited by each, and /proc, " + poll + backstop
	}
	why := ""
	if clockErr != nil {
		why = " (" + clockErr.Error() + ")"
	}
	return "total of every process from /proc, " + poll + "; without the task clock" + why +
		", the children of a process that ignores SIGCHLD count only while they live" + backstop
}

// usageFromClock raises usage.cpu_ms to the task clock's total.
func (s *supervisor) usageFromClock() {
	var b [8]byte
	if n, err := unix.Read(s.cpuClock, b[:]); err != nil || n != 8 {
		return
	}
	u := &s.res.Usage
	clock := time.Duration(*(*uint64)(unsafe.Pointer(&b[0]))) - s.base.clock
	if ms := clock.Milliseconds(); ms > u.CPUMS {
		// The clock does not split user from system time: the rusage's
		// proportion carries over, so that user_ms + system_ms stays
		// cpu_ms for a client that adds them up.
		if rus := u.UserMS + u.SystemMS; rus > 0 {
			u.UserMS = u.UserMS * ms / rus
		} else {
			u.UserMS = ms
		}
		u.SystemMS = ms - u.UserMS
		u.CPUMS = ms
	}
}
