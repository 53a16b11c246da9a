//go:build cgo && !sbx_init_only && linux && amd64

// The init's clone without a full fork of the supervisor (issue 13).
//
// Go's syscall.forkAndExecInChild1 drops CLONE_VFORK|CLONE_VM whenever
// CLONE_NEWUSER is set, because its child must wait for the parent to
// write the id maps, and a vfork child would block the parent. So
// cmd.Start of the init was a full fork of the ~15 MB, 8-thread Go
// supervisor: its page tables copied, every private page write-protected
// (TLB shootdowns on the runtime's threads), copy-on-write faults after.
//
// sbx_spawn clones with CLONE_VM (posix_spawn's way) but without
// CLONE_VFORK: the child runs on a stack of its own in the shared address
// space while the parent writes its maps. What makes that safe:
//   - every signal is blocked on the calling thread across the clone, so
//     the child starts with all blocked; it resets every caught signal to
//     SIG_DFL (its handler table is its own copy: no CLONE_SIGHAND) before
//     it sets the init's mask just before execve. Go's handlers never run
//     in it.
//   - the child makes raw syscall instructions only: no libc call (errno
//     lives in the parent thread's TLS, which the child shares), no
//     allocation, no write to memory but its own stack and the spawn
//     struct's report fields.
//   - the parent stays in this function until the child has exec'd or
//     exited (the CLOEXEC report pipe's EOF: the kernel closes it after
//     the child's mm is replaced, fs/exec.c begin_new_exec, or released,
//     do_exit), and only then frees the stack. The spawn struct and the
//     argv and envp strings are C memory the caller frees after that.
// The child inherits the calling (locked) thread's credentials and
// cgroups, as Go's clone did: nsOwner's per-thread euid, the v1 self-move.
// With a cgroup fd (pure cgroup v2) it is born in that cgroup instead:
// clone3 CLONE_INTO_CGROUP (Linux 5.7), as os/exec's UseCgroupFD, through
// sbx_clone3_vm below, since glibc 2.36 has no clone3 wrapper.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_linux.h"

// rsys is one raw syscall instruction: it returns -errno and touches no
// memory of its own (x86_64 syscall ABI).
static inline long rsys(long n, long a, long b, long c, long d, long e, long f) {
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

// The kernel's struct sigaction for rt_sigaction (not glibc's).
struct ksigaction {
	unsigned long handler;
	unsigned long flags;
	unsigned long restorer;
	unsigned long mask;
};

struct report {
	int step;
	int err;
};

static __attribute__((noreturn)) void child_fail(struct sbx_spawn *a, int step, long ret) {
	struct report r;
	r.step = step;
	r.err = (int)-ret;
	rsys(SYS_write, a->report_fd, (long)&r, sizeof r, 0, 0, 0);
	for (;;)
		rsys(SYS_exit_group, 127, 0, 0, 0, 0, 0);
}

#define TRY(step, call)                          \
	do {                                     \
		long r_ = (call);                \
		if (r_ < 0)                      \
			child_fail(a, (step), r_); \
	} while (0)

static int child(void *arg) {
	struct sbx_spawn *a = arg;
	long r;
	int i, nextfd, report = a->report_fd;
	int fd[SBX_SPAWN_MAXFD];

	// Signals first: nothing of Go's may run here (see the top).
	for (i = 1; i < 65; i++) {
		struct ksigaction old, dfl = {0};
		if (i == SIGKILL || i == SIGSTOP)
			continue;
		if (rsys(SYS_rt_sigaction, i, 0, (long)&old, 8, 0, 0) < 0)
			continue;
		if (old.handler == (unsigned long)SIG_IGN || old.handler == (unsigned long)SIG_DFL)
			continue;
		TRY(SBX_STEP_SIGACTION, rsys(SYS_rt_sigaction, i, (long)&dfl, 0, 8, 0, 0));
	}
	// Before the wait: a supervisor killed while the child waits for its
	// maps takes the child with it (SIGKILL is never blocked). Set again
	// below: a credential change clears it (kernel/cred.c commit_creds).
	TRY(SBX_STEP_PDEATHSIG, rsys(SYS_prctl, PR_SET_PDEATHSIG, a->pdeathsig, 0, 0, 0, 0));
	if (a->nambient > 0)
		TRY(SBX_STEP_KEEPCAPS, rsys(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0, 0));
	// The parent's go-ahead: its maps are written. EOF: it gave up.
	{
		char c;
		rsys(SYS_close, a->go_w, 0, 0, 0, 0, 0);
		r = rsys(SYS_read, a->go_r, (long)&c, 1, 0, 0, 0);
		if (r < 0)
			child_fail(a, SBX_STEP_WAIT_MAPS, r);
		if (r != 1)
			child_fail(a, SBX_STEP_WAIT_MAPS, -EPIPE);
	}
	if (a->setsid)
		TRY(SBX_STEP_SETSID, rsys(SYS_setsid, 0, 0, 0, 0, 0, 0));
	if (a->set_cred) {
		if (a->setgroups)
			TRY(SBX_STEP_SETGROUPS, rsys(SYS_setgroups, 0, 0, 0, 0, 0, 0));
		TRY(SBX_STEP_SETGID, rsys(SYS_setgid, a->gid, 0, 0, 0, 0, 0));
		TRY(SBX_STEP_SETUID, rsys(SYS_setuid, a->uid, 0, 0, 0, 0, 0));
	}
	if (a->nambient > 0) {
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2];
		TRY(SBX_STEP_CAPGET, rsys(SYS_capget, (long)&hdr, (long)data, 0, 0, 0, 0));
		for (i = 0; i < a->nambient; i++) {
			int c = a->ambient[i];
			data[c >> 5].permitted |= 1u << (c & 31);
			data[c >> 5].inheritable |= 1u << (c & 31);
		}
		TRY(SBX_STEP_CAPSET, rsys(SYS_capset, (long)&hdr, (long)data, 0, 0, 0, 0));
		for (i = 0; i < a->nambient; i++)
			TRY(SBX_STEP_AMBIENT, rsys(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, a->ambient[i], 0, 0, 0));
	}
	TRY(SBX_STEP_PDEATHSIG, rsys(SYS_prctl, PR_SET_PDEATHSIG, a->pdeathsig, 0, 0, 0, 0));
	// getppid is 0 in the new pid namespace, so Go's check cannot see a
	// dead parent here; the go-ahead pipe can: the parent holds its
	// write end until this child has exec'd, so a hang-up means the
	// supervisor died before the prctl above.
	{
		struct pollfd p = {a->go_r, 0, 0};
		r = rsys(SYS_poll, (long)&p, 1, 0, 0, 0, 0);
		if (r > 0 && (p.revents & (POLLHUP | POLLERR)))
			child_fail(a, SBX_STEP_PARENT_GONE, -ESRCH);
	}
	rsys(SYS_close, a->go_r, 0, 0, 0, 0, 0);

	// The fd layout os/exec's ExtraFiles gives (forkAndExecInChild1):
	// fd i = fds[i], -1 closed; first move anything in the way up.
	// The moves go above every fd that matters: the passed ones and the
	// one the path names (the sbx-init memfd, /proc/self/fd/N). A move
	// onto that one replaced the image with a pipe, and the execve
	// failed EACCES whenever the passed fds ended just below it (issue 13:
	// a busy sbx serve's fds reach the memfd's 100).
	nextfd = a->nfds;
	if (a->path_fd >= nextfd)
		nextfd = a->path_fd + 1;
	for (i = 0; i < a->nfds; i++) {
		fd[i] = a->fds[i];
		if (fd[i] >= nextfd)
			nextfd = fd[i] + 1;
	}
	if (report < nextfd) {
		TRY(SBX_STEP_DUP3, rsys(SYS_dup3, report, nextfd, O_CLOEXEC, 0, 0, 0));
		a->report_fd = report = nextfd++;
	}
	for (i = 0; i < a->nfds; i++) {
		if (fd[i] >= 0 && fd[i] < i) {
			if (nextfd == report)
				nextfd++;
			TRY(SBX_STEP_DUP3, rsys(SYS_dup3, fd[i], nextfd, O_CLOEXEC, 0, 0, 0));
			fd[i] = nextfd++;
		}
	}
	for (i = 0; i < a->nfds; i++) {
		if (fd[i] == -1) {
			rsys(SYS_close, i, 0, 0, 0, 0, 0);
		} else if (fd[i] == i) {
			TRY(SBX_STEP_FCNTL, rsys(SYS_fcntl, i, F_SETFD, 0, 0, 0, 0));
		} else {
			TRY(SBX_STEP_DUP3, rsys(SYS_dup3, fd[i], i, 0, 0, 0, 0));
		}
	}
	for (i = a->nfds; i < 3; i++)
		rsys(SYS_close, i, 0, 0, 0, 0, 0);

	// The mask the calling thread had: what Go's child restores
	// (runtime.AfterForkInChild), and what execve keeps.
	TRY(SBX_STEP_SIGMASK, rsys(SYS_rt_sigprocmask, SIG_SETMASK, (long)&a->sigmask, 0, 8, 0, 0));
	r = rsys(SYS_execve, (long)a->path, (long)a->argv, (long)a->envp, 0, 0, 0);
	child_fail(a, SBX_STEP_EXECVE, r);
}

// struct clone_args of <linux/sched.h> up to its cgroup field
// (CLONE_ARGS_SIZE_VER2, Linux 5.7), spelled here because that header's
// CLONE_* macros clash with glibc's <sched.h>.
struct sbx_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal;
	uint64_t stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
_Static_assert(sizeof(struct sbx_clone_args) == 88, "CLONE_ARGS_SIZE_VER2");
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define SBX_STR(x) #x
#define SBX_XSTR(x) SBX_STR(x)

// sbx_clone3_vm(args, size, fn, arg) is the clone3 syscall. In the parent
// it returns the child's pid or -errno. The child (rax 0) starts on the
// stack the kernel set from args->stack + stack_size, with every other
// register as the parent had it; it calls fn(arg) and exits with what fn
// returns (child never returns: child_fail exits). It is asm because of
// that new stack: a C function returning in the child would pop a frame
// that is not there, or the parent's, in the shared address space (what
// glibc's clone() does for clone, in its own asm). fn and arg are in rdx
// and r8, which the syscall instruction keeps (it clobbers rax, rcx and
// r11 only); the stack top is page-aligned, so fn's frame is as the ABI
// wants it (rsp+8 a multiple of 16 at its entry).
long sbx_clone3_vm(struct sbx_clone_args *args, unsigned long size, int (*fn)(void *), void *arg);
__asm__(".pushsection .text\n"
	".globl sbx_clone3_vm\n"
	".hidden sbx_clone3_vm\n"
	".type sbx_clone3_vm, @function\n"
	"sbx_clone3_vm:\n"
	"	movq %rcx, %r8\n" // arg: the syscall clobbers rcx
	"	movl $" SBX_XSTR(SYS_clone3) ", %eax\n"
	"	syscall\n"
	"	testq %rax, %rax\n"
	"	jnz 1f\n"
	"	xorl %ebp, %ebp\n" // the child: the end of the frame chain
	"	movq %r8, %rdi\n"
	"	callq *%rdx\n"
	"	movl %eax, %edi\n"
	"	movl $" SBX_XSTR(SYS_exit_group) ", %eax\n"
	"	syscall\n"
	"	hlt\n"
	"1:	ret\n"
	".size sbx_clone3_vm, .-sbx_clone3_vm\n"
	".popsection\n");

#define SBX_GUARD 4096

// clone_into_cgroup clones the child into the v2 cgroup a->cgroup_fd
// (clone3 CLONE_INTO_CGROUP, Linux 5.7): the kernel places it there as
// it is created, or fails the clone (kernel/cgroup/cgroup.c
// cgroup_css_set_fork), so the init is never outside its cgroup and
// needs no attach. The child's stack is the mapping above the guard
// page. The child's pid, or -errno: ENOSYS (no clone3: Linux < 5.3, or
// a seccomp filter that hides it) and E2BIG (a clone_args with a cgroup
// field: < 5.7) say the kernel cannot do it here.
static long clone_into_cgroup(struct sbx_spawn *a, char *stack) {
	struct sbx_clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.flags = (uint64_t)a->flags | CLONE_VM | CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.stack = (uint64_t)(uintptr_t)(stack + SBX_GUARD);
	ca.stack_size = SBX_SPAWN_STACK - SBX_GUARD;
	ca.cgroup = (uint64_t)a->cgroup_fd;
	return sbx_clone3_vm(&ca, sizeof ca, child, a);
}

static const char *step_names[] = {
    [SBX_STEP_NONE] = "",
    [SBX_STEP_SIGACTION] = "rt_sigaction SIG_DFL",
    [SBX_STEP_PDEATHSIG] = "prctl PR_SET_PDEATHSIG",
    [SBX_STEP_KEEPCAPS] = "prctl PR_SET_KEEPCAPS",
    [SBX_STEP_WAIT_MAPS] = "read the id maps' go-ahead",
    [SBX_STEP_SETSID] = "setsid",
    [SBX_STEP_SETGROUPS] = "setgroups []",
    [SBX_STEP_SETGID] = "setgid",
    [SBX_STEP_SETUID] = "setuid",
    [SBX_STEP_CAPGET] = "capget",
    [SBX_STEP_CAPSET] = "capset",
    [SBX_STEP_AMBIENT] = "prctl PR_CAP_AMBIENT_RAISE",
    [SBX_STEP_PARENT_GONE] = "the supervisor died before the init's PR_SET_PDEATHSIG",
    [SBX_STEP_DUP3] = "dup3",
    [SBX_STEP_FCNTL] = "fcntl F_SETFD 0",
    [SBX_STEP_SIGMASK] = "rt_sigprocmask SIG_SETMASK",
    [SBX_STEP_EXECVE] = "execve",
    [SBX_STEP_PIPE] = "pipe2 O_CLOEXEC",
    [SBX_STEP_STACK] = "mmap the child's stack",
    [SBX_STEP_CLONE] = "clone",
    [SBX_STEP_CLONE3] = "clone3",
    [SBX_STEP_UID_MAP] = "write /proc/PID/uid_map",
    [SBX_STEP_SETGROUPS_FILE] = "write /proc/PID/setgroups",
    [SBX_STEP_GID_MAP] = "write /proc/PID/gid_map",
    [SBX_STEP_GO] = "write the id maps' go-ahead",
    [SBX_STEP_REPORT] = "read the child's report",
};

const char *sbx_spawn_step(int step) {
	if (step < 0 || step >= (int)(sizeof step_names / sizeof step_names[0]) || !step_names[step])
		return "unknown step";
	return step_names[step];
}

static int write_proc(int pid, const char *file, const char *data) {
	char path[64];
	int fd, n, len = strlen(data);
	snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0)
		n = -errno;
	else if (n != len)
		n = -EIO;
	close(fd);
	return n < 0 ? n : 0;
}

// sbx_spawn starts the init (see the top). 0: a->pid is the child, which
// has exec'd. -1: a->step and a->err say what failed, and no child is
// left (it is reaped here).
int sbx_spawn(struct sbx_spawn *a) {
	int go[2] = {-1, -1}, rep[2] = {-1, -1}, r, n, status;
	sigset_t all, old;
	void *stack;
	struct report rp;

	a->pid = 0;
	a->step = SBX_STEP_NONE;
	a->err = 0;
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
		a->step = SBX_STEP_PIPE, a->err = errno;
		goto fail_pipes;
	}
	a->go_r = go[0], a->go_w = go[1], a->report_fd = rep[1];
	stack = mmap(NULL, SBX_SPAWN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		a->step = SBX_STEP_STACK, a->err = errno;
		goto fail_pipes;
	}
	// A guard page below: an overflow faults instead of writing into
	// whatever the supervisor mapped there.
	if (mprotect(stack, SBX_GUARD, PROT_NONE) < 0) {
		a->step = SBX_STEP_STACK, a->err = errno;
		munmap(stack, SBX_SPAWN_STACK);
		goto fail_pipes;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	memcpy(&a->sigmask, &old, sizeof a->sigmask);
	if (a->cgroup_fd >= 0) {
		long p = clone_into_cgroup(a, stack);
		r = p < 0 ? -1 : (int)p;
		if (p < 0)
			a->err = (int)-p;
	} else {
		r = clone(child, (char *)stack + SBX_SPAWN_STACK, (int)a->flags | CLONE_VM | SIGCHLD, a);
		if (r < 0)
			a->err = errno;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(go[0]);
	close(rep[1]);
	go[0] = rep[1] = -1;
	if (r < 0) {
		a->step = a->cgroup_fd >= 0 ? SBX_STEP_CLONE3 : SBX_STEP_CLONE;
		munmap(stack, SBX_SPAWN_STACK);
		goto fail_pipes;
	}
	a->pid = r;

	// The maps, as Go writes them (syscall.writeUidGidMappings): uid_map,
	// then setgroups, then gid_map.
	if ((r = write_proc(a->pid, "uid_map", a->uid_map)) < 0) {
		a->step = SBX_STEP_UID_MAP, a->err = -r;
	} else if ((r = write_proc(a->pid, "setgroups", a->setgroups ? "allow" : "deny")) < 0) {
		a->step = SBX_STEP_SETGROUPS_FILE, a->err = -r;
	} else if ((r = write_proc(a->pid, "gid_map", a->gid_map)) < 0) {
		a->step = SBX_STEP_GID_MAP, a->err = -r;
	} else if (write(go[1], "g", 1) != 1) {
		a->step = SBX_STEP_GO, a->err = errno;
	}
	if (a->step != SBX_STEP_NONE)
		kill(a->pid, SIGKILL);

	// EOF: the child exec'd or is gone; a report: it failed a step.
	do
		n = read(rep[0], &rp, sizeof rp);
	while (n < 0 && errno == EINTR);
	if (n == (int)sizeof rp && a->step == SBX_STEP_NONE) {
		a->step = rp.step, a->err = rp.err;
	} else if (n < 0 && a->step == SBX_STEP_NONE) {
		a->step = SBX_STEP_REPORT, a->err = errno;
		kill(a->pid, SIGKILL);
	}
	if (n != 0) {
		// Until EOF the child may still be on its stack.
		char buf[16];
		while ((n = read(rep[0], buf, sizeof buf)) != 0 && !(n < 0 && errno != EINTR))
			;
	}
	if (a->step != SBX_STEP_NONE) {
		// Reaped before the stack goes: then it is surely off it.
		while (waitpid(a->pid, &status, __WALL) < 0 && errno == EINTR)
			;
	}
	munmap(stack, SBX_SPAWN_STACK);
	close(rep[0]);
	close(go[1]);
	return a->step == SBX_STEP_NONE ? 0 : -1;

fail_pipes:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	if (rep[0] >= 0)
		close(rep[0]);
	if (rep[1] >= 0)
		close(rep[1]);
	return -1;
}
