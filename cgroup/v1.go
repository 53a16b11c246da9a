package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// newV1 creates sbx-<id> in every writable v1 hierarchy sbx uses (memory,
// pids, cpu, cpuacct, freezer; co-mounted ones such as "cpu,cpuacct" share
// one directory), each below sbx's own cgroup in that hierarchy, which may
// differ per hierarchy (/proc/self/cgroup). v1 has no no-internal-process
// rule, so sbx stays where it is.
func newV1(lay *layout, id string, l Limits) (*Group, error) {
	g := newGroup(ModeV1)
	skipped := map[string]error{}
	for c, err := range lay.v1Skipped {
		skipped[c] = err
	}
	for _, h := range lay.v1 {
		d, err := makeLockedDir(filepath.Join(h.base, "sbx-"+id))
		if err != nil {
			if isPermission(err) {
				for _, c := range h.controllers {
					skipped[c] = err
				}
				continue
			}
			g.Destroy()
			return nil, err
		}
		d.controllers = h.controllers
		g.dirs = append(g.dirs, d)
		// Not fatal: without them JoinThread fails and the caller
		// attaches the init after its clone instead.
		d.openErr = d.openTasksFDs(h)
	}
	if len(g.dirs) == 0 {
		return nil, fmt.Errorf("%w: no cgroup1 hierarchy is writable (%v)", ErrUnavailable, errors.Join(mapValues(skipped)...))
	}
	if err := g.applyV1(l, skipped); err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

func mapValues(m map[string]error) []error {
	var out []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

func (g *Group) applyV1(l Limits, skipped map[string]error) error {
	need := func(kind, controller string, limit bool) (*cgDir, bool) {
		if !limit {
			return nil, false
		}
		dir, ok := g.dirOf(controller)
		if !ok {
			why := skipped[controller]
			if why == nil {
				why = fmt.Errorf("no cgroup1 %s hierarchy is mounted for this process", controller)
			}
			g.unenforced[kind] = why
		}
		return dir, ok
	}
	if dir, ok := need(KindMemory, "memory", l.MemoryBytes > 0); ok {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		if err := dir.write("memory.limit_in_bytes", v); err != nil {
			return err
		}
		// memsw = RAM + swap; setting it to the same value forbids swap. It
		// must be written after limit_in_bytes (memsw >= limit at all times)
		// and exists only with swap accounting (cgroup-v1/memory.rst 2.4).
		err := dir.write("memory.memsw.limit_in_bytes", v)
		if errors.Is(err, unix.ENOENT) {
			// No swap accounting: keep the memcg from swapping anonymous
			// memory at all instead (memory.rst 5.3, swappiness 0).
			err = dir.write("memory.swappiness", "0")
		}
		if err != nil {
			return err
		}
		// oom_kill_disable is inherited from the parent when a memcg is
		// created (mm/memcontrol-v1.c); with it set, tasks over the limit
		// would hang in the OOM handler instead of being killed
		// (memory.rst 10. OOM Control).
		if err := dir.write("memory.oom_control", "0"); err != nil {
			return err
		}
		g.enforced[KindMemory] = ModeV1
	}
	if dir, ok := need(KindPids, "pids", l.Pids > 0); ok {
		if err := dir.write("pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
		g.enforced[KindPids] = ModeV1
	}
	if dir, ok := need(KindCPUs, "cpu", l.CPUs > 0); ok {
		// cfs_period_us of a new cgroup is the kernel default, 100 ms, not
		// inherited, so only the quota is written (sched-bwc.rst).
		v := strconv.FormatInt(cpuQuotaUS(l.CPUs), 10)
		if err := dir.write("cpu.cfs_quota_us", v); err != nil {
			return err
		}
		g.enforced[KindCPUs] = ModeV1
	}
	if dir, ok := g.dirOf("cpuacct"); ok {
		fd, err := unix.Openat(dir.fd, "cpuacct.usage", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", filepath.Join(dir.path, "cpuacct.usage"), err)
		}
		g.cpuFD = fd
	}
	return nil
}

// splitCPU shares out the exact total of cpuacct.usage in the ratio of
// usage_user to usage_sys. Those two are charged from the scheduler tick
// (kcpustat, one tick per sample: 4 ms at HZ=250), so alone they put a
// run's CPU time in 4 ms steps and a short run at 0 (issue 19, point 6);
// the total is charged in ns at every context switch. The kernel does the
// same for a task's utime/stime (cputime_adjust, kernel/sched/cputime.c),
// and gives all to user when no tick fell in system time.
func splitCPU(total, user, sys time.Duration) (time.Duration, time.Duration) {
	if user+sys <= 0 || sys == 0 {
		return total, 0
	}
	if user == 0 {
		return 0, total
	}
	u := time.Duration(float64(total) * float64(user) / float64(user+sys))
	return u, total - u
}

func (g *Group) statsV1() (Stats, error) {
	var s Stats
	if dir, ok := g.dirOf("cpuacct"); ok {
		// ns, split by the mode the CPU was in when the time was charged
		// (Linux 4.7+; cgroup-v1/cpuacct.rst).
		u, err := dir.readInt("cpuacct.usage_user")
		if err != nil {
			return s, err
		}
		y, err := dir.readInt("cpuacct.usage_sys")
		if err != nil {
			return s, err
		}
		// The total from the fd New opened (a pread, no open).
		total, err := g.cpuUsage()
		if err != nil {
			return s, err
		}
		s.UserCPU, s.SystemCPU = splitCPU(total, time.Duration(u), time.Duration(y))
	}
	if dir, ok := g.dirOf("memory"); ok {
		var err error
		if s.PeakMemoryBytes, err = dir.readInt("memory.max_usage_in_bytes"); err != nil {
			return s, err
		}
		// oom_kill in memory.oom_control: Linux 4.13+.
		if s.OOMKills, err = dir.readKey("memory.oom_control", "oom_kill"); err != nil {
			return s, err
		}
	}
	if dir, ok := g.dirOf("pids"); ok {
		var err error
		if s.PidsPeak, err = dir.readInt("pids.peak"); optional(err) != nil {
			return s, err
		}
		if s.PidsMaxEvents, err = dir.readKey("pids.events", "max"); err != nil {
			return s, err
		}
	}
	return s, nil
}

// killV1 freezes, kills each pid once and thaws. Freezing first means no
// process forks or exits between reading cgroup.procs and the signal; the
// SIGKILLs take effect on thaw. A task that will not freeze within a
// second (uninterruptible sleep) is killed anyway.
func (g *Group) killV1() error {
	dir, ok := g.dirFor("freezer")
	if !ok {
		return nil // waitEmpty kills in rounds
	}
	state := filepath.Join(dir, "freezer.state")
	if err := writeFile(state, "FROZEN"); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	waitFor(func() bool {
		b, err := readFile(state)
		return err != nil || string(b) == "FROZEN\n"
	})
	kerr := killAll([]string{dir})
	if err := writeFile(state, "THAWED"); err != nil {
		return errors.Join(kerr, fmt.Errorf("kill: %w", err))
	}
	return kerr
}
