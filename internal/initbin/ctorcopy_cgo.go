//go:build cgo && linux && sbx_embedinit && !sbx_init_only

package initbin

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U // Linux 6.3 (include/uapi/linux/memfd.h); older headers lack it
#endif

// The copy process's exit statuses other than 0 (done) and an errno of
// its sendfile (1..SBX_COPY_ERRNO_MAX): see ctorcopy.go.
enum {
	SBX_COPY_ERRNO_MAX = 249,
	SBX_COPY_NOREQ = 250,  // the request pipe closed before 16 bytes: sbx gave the copy up
	SBX_COPY_EOF = 251,    // sendfile(2) returned 0 before the image's end
	SBX_COPY_ORPHAN = 252, // the parent was gone by the time PR_SET_PDEATHSIG was set
};

// What the constructor left for ctorcopy.go; read once, from Go, after
// the runtime started (one thread wrote them before any other existed).
int sbx_copy_ran;            // 1: argv[1] is "exec" and the constructor tried
int sbx_copy_exe = -1;       // /proc/self/exe, O_RDONLY|O_CLOEXEC
int sbx_copy_memfd = -1;     // the memfd, MFD_CLOEXEC|MFD_ALLOW_SEALING(|MFD_EXEC)
int sbx_copy_req = -1;       // the request pipe's write end, O_CLOEXEC
int sbx_copy_pid;            // > 0: the copy process
const char *sbx_copy_step;   // the step that failed, NULL if none did
int sbx_copy_errno;          // and its errno

// sbx_copy_keep_only closes every fd of the copy process but its three
// (all 3 or above: sbx_copy_above_stdio): it was cloned with sbx's whole
// fd table, the caller's stdio and any fd sbx was started with included,
// and would hold their ends open for as long as it lives. close_range(2)
// (Linux 5.9) over the gaps; 0-2 by close(2), so that without it the
// caller's pipes are still let go.
static void sbx_copy_keep_only(int a, int b, int c) {
	int t;
	if (a > b) { t = a; a = b; b = t; }
	if (b > c) { t = b; b = c; c = t; }
	if (a > b) { t = a; a = b; b = t; }
	close(0);
	close(1);
	close(2);
#ifdef SYS_close_range
	if (a > 3)
		syscall(SYS_close_range, 3U, (unsigned)a - 1, 0U);
	if (b > a + 1)
		syscall(SYS_close_range, (unsigned)a + 1, (unsigned)b - 1, 0U);
	if (c > b + 1)
		syscall(SYS_close_range, (unsigned)b + 1, (unsigned)c - 1, 0U);
	syscall(SYS_close_range, (unsigned)c + 1, ~0U, 0U);
#endif
}

// sbx_copy_child is the copy process: it waits for the request (the
// image's file offset and length, two int64s, which only Go can compute:
// the image is a Go symbol, local to Go's object file, so C cannot name
// it), sends that range of /proc/self/exe into the memfd and exits. It
// calls nothing of libc's but system-call wrappers and _exit(2): it was
// made by a raw clone, so libc's own view of the process (its cached
// tid, its locks) is the parent's.
static void sbx_copy_child(int req, int exe, int memfd, pid_t parent) {
	// The copy must not outlive sbx (prctl(2) PR_SET_PDEATHSIG; the
	// getppid check closes the race with a parent that died first).
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(SBX_COPY_ORPHAN);
	sbx_copy_keep_only(req, exe, memfd);
	int64_t r[2];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = read(req, (char *)r + got, sizeof r - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(SBX_COPY_NOREQ);
		got += (size_t)n;
	}
	off_t off = (off_t)r[0];
	int64_t left = r[1];
	while (left > 0) {
		ssize_t n = sendfile(memfd, exe, &off, (size_t)left);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			_exit(errno > 0 && errno <= SBX_COPY_ERRNO_MAX ? errno : SBX_COPY_ERRNO_MAX);
		if (n == 0)
			_exit(SBX_COPY_EOF);
		left -= n;
	}
	_exit(0);
}

// sbx_copy_above_stdio moves fd to 3 or above. A sbx started with fd 0,
// 1 or 2 closed would otherwise get one of them here, before Go's runtime
// opens /dev/null on each closed one (runtime.checkfds, Go 1.22): the
// fd would stand for sbx's stdin, stdout or stderr, and be closed or
// reused under them once the copy is done. On an error fd is closed and
// the result is -1.
static int sbx_copy_above_stdio(int fd) {
	if (fd < 0 || fd > 2)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	int e = errno;
	close(fd);
	errno = e;
	return high;
}

static void sbx_copy_fail(const char *step) {
	sbx_copy_step = step;
	sbx_copy_errno = errno;
}

// sbx_copy_ctor starts the sbx-init memfd's copy of an `sbx exec` in a
// process of its own, before Go's runtime starts (issue 13): glibc calls
// the .init_array constructors with argc, argv and envp, also in a static
// binary (csu/libc-start.c, call_init). argv[1] is the command, as
// startsEarly reads it (early.go). A process, not a thread: it shares no
// mm with the supervisor, so the supervisor's page faults send no TLB
// shootdowns to it, and the Go runtime never sees it. Every failure only
// leaves sbx_copy_step set: Go then copies as before.
__attribute__((constructor)) static void sbx_copy_ctor(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 2 || strcmp(argv[1], "exec") != 0)
		return;
	sbx_copy_ran = 1;
	int exe = sbx_copy_above_stdio(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
	if (exe < 0) {
		sbx_copy_fail("open /proc/self/exe O_RDONLY");
		return;
	}
	// The flags of memfdCreate (initbin.go), MFD_EXEC retried without
	// where the kernel predates it (EINVAL).
	int memfd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (memfd < 0 && errno == EINVAL)
		memfd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	memfd = sbx_copy_above_stdio(memfd);
	if (memfd < 0) {
		sbx_copy_fail("memfd_create(\"sbx-init\", MFD_CLOEXEC|MFD_ALLOW_SEALING|MFD_EXEC)");
		close(exe);
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		sbx_copy_fail("pipe2(O_CLOEXEC)");
		close(memfd);
		close(exe);
		return;
	}
	p[0] = sbx_copy_above_stdio(p[0]);
	p[1] = sbx_copy_above_stdio(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		sbx_copy_fail("fcntl(pipe, F_DUPFD_CLOEXEC, 3)");
		if (p[0] >= 0)
			close(p[0]);
		if (p[1] >= 0)
			close(p[1]);
		close(memfd);
		close(exe);
		return;
	}
	pid_t parent = getpid();
	// clone(2) without flags: a copy of this (still small) process, with
	// no exit signal, so that it is a "clone" child, which no wait(2)
	// sees without __WCLONE or __WALL: only ctorcopy.go's wait4 by its
	// pid reaps it, and no SIGCHLD interrupts the supervisor. A parent
	// that exits unreaped hands it to its reaper with SIGCHLD as its
	// exit signal (kernel/exit.c, reparent_leader).
	long pid = syscall(SYS_clone, 0UL, 0UL, NULL, NULL, 0UL);
	if (pid < 0) {
		sbx_copy_fail("clone(no flags, no exit signal)");
		close(p[0]);
		close(p[1]);
		close(memfd);
		close(exe);
		return;
	}
	if (pid == 0) {
		close(p[1]);
		sbx_copy_child(p[0], exe, memfd, parent);
	}
	close(p[0]);
	sbx_copy_exe = exe;
	sbx_copy_memfd = memfd;
	sbx_copy_req = p[1];
	sbx_copy_pid = (int)pid;
}
*/
import "C"

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// constructorCopy is what the C constructor did (ctorcopy.go).
func constructorCopy() ctorCopy {
	c := ctorCopy{ran: C.sbx_copy_ran != 0, exe: int(C.sbx_copy_exe), memfd: int(C.sbx_copy_memfd), req: int(C.sbx_copy_req), pid: int(C.sbx_copy_pid)}
	if C.sbx_copy_step != nil {
		c.err = fmt.Errorf("%s: %w", C.GoString(C.sbx_copy_step), unix.Errno(C.sbx_copy_errno))
	} else if c.ran && c.pid <= 0 {
		c.err = errors.New("the C constructor started no copy process")
	}
	return c
}

// The copy process's exit statuses, as in the C above.
const (
	copyErrnoMax = C.SBX_COPY_ERRNO_MAX
	copyNoReq    = C.SBX_COPY_NOREQ
	copyEOF      = C.SBX_COPY_EOF
	copyOrphan   = C.SBX_COPY_ORPHAN
)
