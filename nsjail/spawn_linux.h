// The init's clone without a full fork (spawn_linux.c, spawn_cgo_linux.go).
#include <stdint.h>

#define SBX_SPAWN_MAXFD 16
#define SBX_SPAWN_STACK (64 * 1024)
#define SBX_SPAWN_MAXCAPS 64

enum {
	SBX_STEP_NONE,
	SBX_STEP_SIGACTION,
	SBX_STEP_PDEATHSIG,
	SBX_STEP_KEEPCAPS,
	SBX_STEP_WAIT_MAPS,
	SBX_STEP_SETSID,
	SBX_STEP_SETGROUPS,
	SBX_STEP_SETGID,
	SBX_STEP_SETUID,
	SBX_STEP_CAPGET,
	SBX_STEP_CAPSET,
	SBX_STEP_AMBIENT,
	SBX_STEP_PARENT_GONE,
	SBX_STEP_DUP3,
	SBX_STEP_FCNTL,
	SBX_STEP_SIGMASK,
	SBX_STEP_EXECVE,
	SBX_STEP_PIPE,
	SBX_STEP_STACK,
	SBX_STEP_CLONE,
	SBX_STEP_CLONE3,
	SBX_STEP_UID_MAP,
	SBX_STEP_SETGROUPS_FILE,
	SBX_STEP_GID_MAP,
	SBX_STEP_GO,
	SBX_STEP_REPORT,
};

struct sbx_spawn {
	// In.
	const char *path;
	char *const *argv, *const *envp;
	int fds[SBX_SPAWN_MAXFD]; // the child's fd i; -1: closed
	int nfds;
	unsigned long flags; // CLONE_NEW*
	const char *uid_map, *gid_map;
	int setgroups; // "allow" and setgroups([]) in the child, else "deny"
	int set_cred;
	unsigned uid, gid;
	int ambient[SBX_SPAWN_MAXCAPS];
	int nambient;
	int pdeathsig;
	int setsid;
	int path_fd; // N of a path /proc/self/fd/N, else -1: never a dup3 target
	int cgroup_fd; // a v2 cgroup dir: clone3 CLONE_INTO_CGROUP into it; -1: clone
	// Out.
	int pid, step, err;
	// Private.
	int go_r, go_w, report_fd;
	uint64_t sigmask;
};

int sbx_spawn(struct sbx_spawn *a);
const char *sbx_spawn_step(int step);
