package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// subtreeMu serialises, within one process, enabling controllers in the
// base's cgroup.subtree_control and moving sbx into its leaf. Other sbx
// processes are handled by retrying (see enableV2).
var subtreeMu sync.Mutex

func newV2(lay *layout, id string, l Limits) (*Group, error) {
	enabled, why := enableV2(lay)
	g := newGroup(ModeV2)
	d, err := makeLockedDir(filepath.Join(lay.v2.base, "sbx-"+id))
	if err != nil {
		if isPermission(err) {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return nil, err
	}
	g.dirs = []*cgDir{d}
	if err := g.applyV2(l, enabled, why); err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

func (g *Group) applyV2(l Limits, enabled map[string]bool, why map[string]error) error {
	dir := g.dirs[0]
	need := func(kind, controller string, limit bool) bool {
		if !limit {
			return false
		}
		if !enabled[controller] {
			g.unenforced[kind] = why[controller]
			return false
		}
		return true
	}
	if need(KindMemory, "memory", l.MemoryBytes > 0) {
		if err := dir.write("memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
		// No swap, so that the limit is the sandbox's whole footprint.
		// memory.swap.max exists only with swap accounting (CONFIG_MEMCG_SWAP
		// and not swapaccount=0); without it swap is not charged at all.
		if err := dir.write("memory.swap.max", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		g.enforced[KindMemory] = ModeV2
	}
	if need(KindPids, "pids", l.Pids > 0) {
		if err := dir.write("pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
		g.enforced[KindPids] = ModeV2
	}
	if need(KindCPUs, "cpu", l.CPUs > 0) {
		v := fmt.Sprintf("%d %d", cpuQuotaUS(l.CPUs), cpuPeriodUS)
		if err := dir.write("cpu.max", v); err != nil {
			return err
		}
		g.enforced[KindCPUs] = ModeV2
	}
	fd, err := unix.Openat(dir.fd, "cpu.stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(dir.path, "cpu.stat"), err)
	}
	g.cpuFD = fd
	return nil
}

// enableV2 makes sure the controllers sbx uses are enabled in the base's
// cgroup.subtree_control, so that sandbox cgroups get their interface
// files. It returns which are enabled and, for the others, why not.
//
// The no-internal-process rule (cgroup-v2.rst, "No Internal Process
// Constraint"): a non-root cgroup can enable domain controllers for its
// children only while it holds no process (EBUSY otherwise). When sbx was
// started in a cgroup that holds it, sbx first moves itself into the leaf
// sbx-supervisor-<pid> below it. See doc.go for the concurrency and cleanup
// of that leaf.
func enableV2(lay *layout) (map[string]bool, map[string]error) {
	subtreeMu.Lock()
	defer subtreeMu.Unlock()
	enabled, why := map[string]bool{}, map[string]error{}
	base := lay.v2.base
	sc := filepath.Join(base, "cgroup.subtree_control")
	for _, c := range v2Controllers {
		if !slices.Contains(lay.v2Avail, c) {
			why[c] = fmt.Errorf("cgroup2 controller %s is not delegated to %s (not in its cgroup.controllers)", c, base)
		}
	}
	have, err := readFile(sc)
	if err != nil {
		for _, c := range lay.v2Avail {
			why[c] = err
		}
		return enabled, why
	}
	var missing []string
	for _, c := range lay.v2Avail {
		if slices.Contains(strings.Fields(string(have)), c) {
			enabled[c] = true
		} else {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return enabled, why
	}
	err = writeFile(sc, "+"+strings.Join(missing, " +"))
	if errors.Is(err, unix.EBUSY) && lay.v2.own == base {
		if merr := moveSelfToLeaf(lay); merr != nil {
			err = fmt.Errorf("%w; moving sbx out of it first: %v", err, merr)
		} else if err = retryEnable(base, sc, missing); err != nil {
			if rerr := moveSelfBack(lay); rerr != nil {
				err = fmt.Errorf("%w; moving sbx back: %v", err, rerr)
			}
		}
	} else if errors.Is(err, unix.EBUSY) {
		// Already in a leaf: wait the same way for sbx processes that are
		// still moving out of the base.
		err = retryEnable(base, sc, missing)
	}
	if err == nil {
		for _, c := range missing {
			enabled[c] = true
		}
		return enabled, why
	}
	if errors.Is(err, unix.EBUSY) {
		for _, c := range missing {
			why[c] = fmt.Errorf("cgroup2 controller %s cannot be enabled: %w; run sbx in a cgroup of its own (e.g. systemd-run --user --scope -p Delegate=yes)", c, err)
		}
		return enabled, why
	}
	// Some other refusal: find out which controllers the kernel takes.
	for _, c := range missing {
		if cerr := writeFile(sc, "+"+c); cerr != nil {
			why[c] = fmt.Errorf("cgroup2 controller %s cannot be enabled: %w", c, cerr)
		} else {
			enabled[c] = true
		}
	}
	return enabled, why
}

// enableWait bounds how long New waits for other sbx processes to move
// out of the base; a variable for tests.
var enableWait = 2 * time.Second

// retryEnable retries enabling while the base is busy only because of
// other sbx processes (the same executable) that were started in it at the
// same time and are about to move into their own leaves: their write
// succeeds after the last move, and writing a controller that is already
// enabled is a no-op. Any other process in the base never leaves on its
// own, so then it gives up at once. (A fixed retry window is not enough:
// under load or emulation a sibling may take longer to reach its move,
// and giving up early makes every sibling fail, since the one that gives
// up moves back into the base.)
func retryEnable(base, sc string, missing []string) error {
	self, _ := exeID("self")
	b := newBackoff(enableWait, 200*time.Microsecond, 10*time.Millisecond)
	for {
		err := writeFile(sc, "+"+strings.Join(missing, " +"))
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		pids, rerr := readPids(filepath.Join(base, "cgroup.procs"))
		if rerr != nil {
			return fmt.Errorf("%w (%v)", err, rerr)
		}
		var foreign, siblings []string
		for _, p := range pids {
			if p == os.Getpid() {
				continue
			}
			id, ok := exeID(strconv.Itoa(p))
			switch {
			case leaving(p):
				// A process of this sbx's own (the sbx-init memfd's copy
				// process, which a C constructor forks before Go's
				// runtime, internal/initbin), or one already in do_exit:
				// both leave the base within milliseconds (longer under
				// emulation), and exeID may not read an exiting one's exe
				// (exit_mm comes before cgroup_exit). Either was once
				// taken for a foreign process, and every limit fell back
				// to rlimits (make vmtest as uid 1000).
				siblings = append(siblings, describePid(p))
			case !ok:
				// exited meanwhile (ENOENT), or not ours to inspect (EACCES):
				// only the latter blocks, and it is not a sibling sbx.
				if _, serr := os.Stat(fmt.Sprintf("/proc/%d", p)); serr == nil {
					foreign = append(foreign, describePid(p))
				}
			case id == self:
				siblings = append(siblings, describePid(p))
			default:
				foreign = append(foreign, describePid(p))
			}
		}
		if len(foreign) > 0 {
			return fmt.Errorf("%w (%s also holds pids %s, which are not sbx)", err, base, strings.Join(foreign, ", "))
		}
		if b.expired() {
			return fmt.Errorf("%w (sbx processes %s did not move out of %s within %v)", err, strings.Join(siblings, ", "), base, enableWait)
		}
		b.sleep()
	}
}

// fileID identifies a file by device and inode.
type fileID struct{ dev, ino uint64 }

// exeID identifies the executable of a process ("self" or a pid).
func exeID(pid string) (fileID, bool) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/exe", &st); err != nil {
		return fileID{}, false
	}
	return fileID{st.Dev, st.Ino}, true
}

// pfExiting is PF_EXITING of include/linux/sched.h: the task is in
// do_exit.
const pfExiting = 0x4

// leaving says whether pid p is a child of this process or exiting, from
// /proc/p/stat (proc(5): ppid is the 4th field, flags the 9th; the comm
// before them, in parentheses, may hold spaces and ')').
func leaving(p int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp session tty_nr tpgid flags ...
	if len(f) < 7 {
		return false
	}
	ppid, err1 := strconv.Atoi(f[1])
	flags, err2 := strconv.ParseUint(f[6], 10, 64)
	return (err1 == nil && ppid == os.Getpid()) || (err2 == nil && flags&pfExiting != 0)
}

func describePid(p int) string {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
	return fmt.Sprintf("%d (%s)", p, strings.TrimSpace(string(comm)))
}

// moveSelfToLeaf moves this whole process (all threads: writing a pid to
// cgroup.procs migrates the thread group) into base/sbx-supervisor-<pid>.
// Children started afterwards are born there unless placed elsewhere
// (CLONE_INTO_CGROUP, Attach).
func moveSelfToLeaf(lay *layout) error {
	pid := strconv.Itoa(os.Getpid())
	leaf := filepath.Join(lay.v2.base, supervisorPrefix+pid)
	var err error
	// Up to 3 tries: a concurrent CleanupStale may remove the leaf while it
	// is still empty, between our mkdir and our move.
	for range 3 {
		if err = unix.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", leaf, err)
		}
		if err = writeFile(filepath.Join(leaf, "cgroup.procs"), pid); err == nil {
			lay.v2.own = leaf
			return nil
		}
		if !errors.Is(err, unix.ENOENT) {
			break
		}
	}
	unix.Rmdir(leaf)
	return err
}

// moveSelfBack undoes moveSelfToLeaf after enabling failed for good, so
// that a failed attempt leaves the host as it found it. It works because
// the base's subtree_control still has no domain controller enabled.
func moveSelfBack(lay *layout) error {
	if err := writeFile(filepath.Join(lay.v2.base, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return err
	}
	leaf := lay.v2.own
	lay.v2.own = lay.v2.base
	if err := unix.Rmdir(leaf); err != nil {
		return fmt.Errorf("rmdir %s: %w", leaf, err)
	}
	return nil
}

func (g *Group) statsV2() (Stats, error) {
	dir := g.dirs[0]
	var s Stats
	b, err := dir.read("cpu.stat")
	if err != nil {
		return s, err
	}
	u, ok1 := keyValue(b, "user_usec")
	y, ok2 := keyValue(b, "system_usec")
	if !ok1 || !ok2 {
		return s, fmt.Errorf("parse %s: no user_usec/system_usec in %q", filepath.Join(dir.path, "cpu.stat"), b)
	}
	s.UserCPU, s.SystemCPU = time.Duration(u)*time.Microsecond, time.Duration(y)*time.Microsecond
	if s.PeakMemoryBytes, err = dir.readInt("memory.peak"); optional(err) != nil {
		return s, err
	}
	if b, err = dir.read("memory.events"); optional(err) != nil {
		return s, err
	} else if err == nil {
		s.OOMKills, _ = keyValue(b, "oom_kill")
	}
	if s.PidsPeak, err = dir.readInt("pids.peak"); optional(err) != nil {
		return s, err
	}
	if b, err = dir.read("pids.events"); optional(err) != nil {
		return s, err
	} else if err == nil {
		s.PidsMaxEvents, _ = keyValue(b, "max")
	}
	return s, nil
}

// killV2 writes cgroup.kill (Linux 5.14): the kernel sends SIGKILL to every
// process of the cgroup and its descendants in one go, and processes that
// fork meanwhile are caught too (cgroup-v2.rst, "cgroup.kill"). Before
// 5.14: freeze (cgroup.freeze, Linux 5.2), SIGKILL each pid, thaw; a
// frozen task still dies of SIGKILL.
func (g *Group) killV2() error {
	dir := g.dirs[0].path
	err := writeFile(filepath.Join(dir, "cgroup.kill"), "1")
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	freeze := filepath.Join(dir, "cgroup.freeze")
	if ferr := writeFile(freeze, "1"); ferr == nil {
		waitFor(func() bool {
			b, err := readFile(filepath.Join(dir, "cgroup.events"))
			v, _ := keyValue(b, "frozen")
			return err != nil || v == 1
		})
		defer writeFile(freeze, "0")
	}
	return killAll([]string{dir})
}
