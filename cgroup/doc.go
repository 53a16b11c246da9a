// Package cgroup creates, limits, reads and kills one sandbox's cgroup.
//
// # Modes
//
// The mode is found once per process (Probe, New) from /proc/self/cgroup
// and /proc/self/mountinfo:
//
//   - ModeV2 ("cgroup2"): sbx's own cgroup in the unified hierarchy offers
//     cpu, memory or pids (its cgroup.controllers), or no v1 hierarchy is
//     mounted at all. The Group is one directory.
//   - ModeV1 ("cgroup1"): hybrid or legacy hosts such as the dev and CI
//     machines, where the controllers are bound to v1 and the v2 mount has
//     none of them. The Group is one directory in each of the memory, pids,
//     cpu, cpuacct and freezer hierarchies that sbx may write (co-mounted
//     ones, e.g. "cpu,cpuacct", share a directory).
//   - ModeNone: nothing is writable (unprivileged, no delegation): New and
//     Probe return an error that errors.Is(err, ErrUnavailable), and the
//     caller enforces limits with rlimits and says so.
//
// Mixing (pids on v2, memory on v1) is not supported.
//
// # Where the cgroups go (DESIGN.md, invariant 6)
//
// Every sandbox cgroup is sbx-<id>, directly below the cgroup sbx was
// started in, in each hierarchy (on v1 that cgroup differs per hierarchy:
// on the dev machine memory is /process_api/<id>, the rest is /). Nothing
// above that cgroup is written, ever: not its parent's subtree_control,
// not its own limits.
//
// # v2 and the no-internal-process rule
//
// A sandbox's interface files (memory.max, pids.max, cpu.max) exist only if
// its parent B, sbx's cgroup, enables the controllers in
// B/cgroup.subtree_control, and a non-root cgroup may do that only while it
// holds no process (cgroup-v2.rst, "No Internal Process Constraint"; the
// write fails with EBUSY). New therefore:
//
//  1. reads B/cgroup.subtree_control; when cpu, memory and pids (those of
//     them in B/cgroup.controllers) are enabled already, it just creates
//     B/sbx-<id>. This is the steady state, and the root cgroup's case.
//  2. otherwise writes "+cpu +memory +pids"; on EBUSY it moves sbx itself
//     (the whole process: writing a pid to cgroup.procs moves every thread)
//     into the leaf B/sbx-supervisor-<pid> and writes again.
//  3. while the write fails with EBUSY, it looks at who is still in B.
//     Other sbx processes (same executable, by device and inode of
//     /proc/<pid>/exe) started there at the same time are about to move
//     into their own leaves: it retries until the last has moved (up to
//     2 s; writing an enabled controller again is a no-op). So are sbx's
//     own children and any process already in do_exit (/proc/<pid>/stat:
//     ppid, PF_EXITING): the sbx-init memfd's copy process, which a C
//     constructor forks before Go's runtime, sits in B until its copy is
//     done, and an exiting process's exe can no longer be read (exit_mm
//     before cgroup_exit). Any other
//     process (the shell or agent platform that started sbx) never leaves,
//     so it gives up at once: it moves sbx back into B, removes its leaf,
//     and still returns a Group (cgroup.kill, CPU accounting and
//     CLONE_INTO_CGROUP work without controllers) whose Unenforced names
//     the pids in the way. Enforced is empty then: the caller falls back
//     to rlimits for those limits. (A fixed retry window fails under load:
//     the sibling that gives up first moves back into B and makes all of
//     them fail; the VM showed exactly that.)
//
// The per-pid leaf (rather than one shared leaf) means sbx never moves a
// process it does not own, and a leaf is empty exactly when its sbx has
// exited. A leaf stays while its sbx lives (sbx cannot move back into B
// once B has controllers enabled, and must never disable them: other
// sbx processes' sandboxes use them); CleanupStale removes it after the
// process has exited. An sbx started inside another sbx's leaf (e.g. sbx
// serve running sbx exec) takes that leaf's parent as B and stays where
// it is.
//
// In practice sbx must run in a cgroup of its own for v2 limits: a systemd
// service with Delegate=yes (sbx serve), or systemd-run --user --scope -p
// Delegate=yes sbx exec ... . Started from a login shell, which shares its
// session scope, sbx gets no controller: doctor should say so. (Asking
// systemd over D-Bus for such a scope, as podman and runc do, is possible
// but not done here.)
//
// # Ownership and CleanupStale
//
// Each directory of a live Group is held open with flock(LOCK_EX) until
// Destroy. CleanupStale skips a sbx-* directory whose lock is held, so
// that one sbx's cleanup never removes another's fresh cgroup in the
// window between New and the init's start, when it is still empty.
// Without a held lock, rmdir removes the directory if it holds no process
// and no child (the kernel refuses with EBUSY otherwise: nothing is read
// first). New locks right after mkdir and checks the directory still
// exists, making it again if a concurrent cleanup won the race. Locks die
// with their process, so a SIGKILLed sbx's groups are stale at once.
//
// The scan runs on every run (nsjail starts it once the payload runs), so
// it is kept cheap rather than rare: one open and getdents64 per hierarchy
// (no os.File), only sbx-* directories tried, this process's own live
// Groups skipped without a lock attempt (they are listed from
// makeLockedDir to Destroy), and a name found locked in one v1 hierarchy
// not tried in the others (a live Group of another sbx names its
// directory alike in each). A stale group costs open, flock and rmdir.
//
// # What the limits mean
//
//   - memory: v2 memory.max plus memory.swap.max=0 where swap is accounted;
//     v1 memory.limit_in_bytes, memory.memsw.limit_in_bytes set to the same
//     value (or memory.swappiness=0 without swap accounting) and
//     memory.oom_control=0, since oom_kill_disable is inherited from the
//     parent. Everything the group's processes charge counts, page cache
//     and kernel memory included, and the Go init too when it is born
//     inside (CLONE_INTO_CGROUP on v2, JoinThread on v1); when it is
//     attached instead (the v1 fallback), what it charged before Attach
//     stays charged to sbx's cgroup (charges do not move).
//     memory.oom.group is left at 0: the OOM killer kills the largest
//     process (the payload) and the init survives to report it.
//   - pids: pids.max counts tasks, i.e. threads. A Go init has 4 threads
//     idle and more under load, all charged to the sandbox. A refused fork
//     fails with EAGAIN and counts in pids.events "max"; nothing is killed
//     by the controller. pids.current may read max+1 for an instant (a fork
//     charges, then reverts: kernel/cgroup/pids.c pids_try_charge);
//     pids.peak counts only charges that succeeded.
//   - cpus: CFS bandwidth, quota = CPUs x 100 ms per 100 ms period
//     (Documentation/scheduler/sched-bwc.rst; minimum 1 ms, i.e. 0.01
//     CPUs). Steady state is exact (0.497-0.500 CPUs measured for 0.5);
//     a new group starts with a full quota and the window rarely aligns
//     with the periods, so short runs get a little more: 0.53-0.62 s of
//     CPU in a 1 s run, 0.78-0.86 s in a 1.5 s run, at 0.5.
//
// # Rootless v2
//
// A delegated user creates sbx-<id>, so the kernel makes it the owner of
// all its files, memory.max included. The limits then hold only because
// the payload cannot reach cgroupfs with that uid: it has no /sys, no
// capabilities, and cannot mount (DESIGN.md invariants 1 and 2).
//
// # Why not github.com/containerd/cgroups/v3
//
// DESIGN.md planned it. Measured and read (v3.1.3), it does not fit:
//
//   - Linking cgroup2 (or cgroup1) adds 5.2 MB to a static binary and its
//     package inits (protobuf registry, logrus, cilium/ebpf, godbus) add
//     1.1-1.4 ms to every exec: a hello-world went from 1.9-2.0 ms to
//     3.0-3.4 ms median per fork+exec+wait here. sbx pays it twice per
//     sandbox (the supervisor and the re-executed init), against a budget
//     of a few ms.
//   - cgroup2.NewManager writes "+controllers" into the subtree_control of
//     every ancestor from the mount point down, which breaks invariant 6;
//     it enables all controllers in one write, so one missing controller
//     fails all; it knows nothing of the no-internal-process move.
//   - Neither manager reads pids.peak or pids.events, sets memsw, keeps a
//     file open for cheap polling, or returns errors naming the value;
//     cgroup2's Kill fallback logs through logrus to stderr (the payload's).
//   - cgroup1 has no Kill, and its Stat parses every file of every
//     controller in goroutines.
//
// What is used instead is ~40 syscalls of plain file I/O (x/sys/unix).
// go.mod does not require the module, so nothing else changes.
//
// # Costs (dev machine, 2 cores, Linux 6.18, v1; busy shared host)
//
//	New (5 hierarchies, 3 limits)   0.6-1.1 ms  (~42 syscalls; mkdir of a memcg dominates)
//	Attach, idle > ~30 ms before    7.5-12 ms   (one RCU grace period, for all 5 hierarchies)
//	Attach, back to back (< ~20 ms) 0.13-0.19 ms
//	JoinThread + LeaveThread        0.2-0.6 ms  (a thread moving itself: no grace period, Linux 5.17+)
//	CPUUsage                        1.2-1.5 µs  (one pread of a kept fd)
//	Stats                           ~0.03 ms CPU (v1: 6 reads by openat on the kept directory fds, the total by pread)
//	Kill + Destroy, 1 process       2.4-3.8 ms  (freeze, SIGKILL, thaw, wait until empty, rmdir x5)
//	Kill of 13 processes            7-13 ms
//	Destroy, empty                  0.22-0.26 ms
//	CleanupStale, nothing to do     ~0.03 ms (getdents64 x5; it was 0.05-0.16 with os.File and a flock of each own group)
//	layout discovery (once)         ~0.085 ms (BenchmarkDiscover; 0.145 with os.ReadFile and a 64 KB scanner)
//
// On v2 (measured only in the TCG-emulated VM, 10-25x slower than
// hardware) a cgroup.procs write after an idle gap also costs a grace
// period (24 ms vs 8 ms back to back there): the lock is the same
// (cgroup_threadgroup_rwsem). CLONE_INTO_CGROUP (FD) avoids it entirely.
//
// # The init is born in its group on v1 too (JoinThread)
//
// Writing a pid to cgroup.procs takes the global cgroup_threadgroup_rwsem
// for writing, and its rcu_sync waits out an RCU grace period (above:
// 7.5-12 ms after an idle gap, up to 20 ms seen) before the payload may be
// forked. A thread that moves itself ("0" to a v1 tasks file) skips that
// lock (kernel/cgroup/cgroup.c cgroup_procs_write_start; commit
// 9a3284fad42f "cgroup: Optimize single thread migration", Linux 5.17,
// backported to the 5.4+ stable trees). So on v1 the supervisor's locked
// thread that clones the init moves itself into the sandbox's group in
// every hierarchy (JoinThread), clones the init there (copy_process gives
// the child its parent thread's css_set: born inside, like
// CLONE_INTO_CGROUP), and moves itself back (LeaveThread) before anything
// else runs on it: inside, it would count in pids.max, be frozen by Kill
// and keep rmdir busy, and Kill's cgroup.procs would list sbx itself
// (killAll and waitEmpty never signal their own process, in case).
// Measured in sbx: 0.14-0.5 ms in, 0.06-0.15 ms back, every time, against
// 0.3-18 ms for the attach. The init's start-up then runs in the sandbox's
// cpu group, as on v2; under load that makes the clone slower (the
// group's CFS shares are split by load between the blocked parent thread
// and the child: DESIGN.md, "The init born in its cgroup on v1").
//
// Permissions: v1 lets a writer move a task if the euid is 0 or the
// task's uid or suid, checked against the credentials the tasks file was
// opened with (of->file->f_cred, Linux 5.16, commit 1756d7994ad8, also in
// the stable trees). New opens both tasks files (the group's and its
// parent's) with the process's credentials, so the thread may have taken
// another euid in between (a root-run sandbox's nsOwner) and still move
// in and out. A delegated v1 subtree (sbx not root) works the same: the
// opener's euid is the thread's own uid.
//
// When the move in fails (a thread not in sbx's own cgroup, an RT thread
// refused by cpu.rt_runtime_us, a kernel before 5.17, where the caller does
// not try), nothing moved and the caller attaches the init after the
// clone, as below. When the move back fails, ErrThreadInside: the caller
// must end that thread and the run.
//
// # Attach before or while the init works (v1, the fallback)
//
// Measured with a stand-in init doing 12 ms of syscalls after an idle gap:
// Attach then "go" took 6.2-6.6 ms longer end to end than no cgroup at
// all; "go" then Attach in parallel took 0.6-1.0 ms longer, and the
// target's own work was not slowed (the write waits for a grace period,
// which blocks no one; forks are blocked only for the migration itself).
// So: start the init, let it do its mount setup, Attach meanwhile, and
// tell it "attached" before it forks the payload. Never let it fork
// first: a child forked before the Attach stays outside the cgroup (v1
// moves the thread group only; the tests saw exactly that).
package cgroup
