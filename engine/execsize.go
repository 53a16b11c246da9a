package engine

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/units"
)

// maxArgStrlen is the most bytes one argument or environment string may
// take, its NUL included: MAX_ARG_STRLEN, 32 pages (include/uapi/linux/
// binfmts.h).
func maxArgStrlen() int { return 32 * os.Getpagesize() }

// maxArgBytes is how much argv and envp together may take on the new
// stack: a quarter of RLIMIT_STACK, at most 3/4 of _STK_LIM (6 MiB), at
// least 32 pages (fs/exec.c, bprm_stack_limits, Linux 6.x). The sandbox
// inherits sbx's own RLIMIT_STACK.
func maxArgBytes() int {
	limit := 6 << 20
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &rl); err == nil && rl.Cur/4 < uint64(limit) {
		limit = int(rl.Cur / 4)
	}
	return max(limit, maxArgStrlen())
}

// ArgTooBigError is CheckExecSize's: Index is the argument past
// MAX_ARG_STRLEN, or -1 when all of them together are past the stack's
// share; Size and Limit are in bytes.
type ArgTooBigError struct {
	Index       int
	Size, Limit int
	msg         string
}

func (e *ArgTooBigError) Error() string { return e.msg }

// CheckExecSize refuses, on the host and before any clone, an argv and
// environment that execve(2) inside would refuse with E2BIG: one string
// past MAX_ARG_STRLEN, or all of them past the stack's share.
func CheckExecSize(argv, env []string) error {
	total := 0
	for i, a := range argv {
		if len(a)+1 > maxArgStrlen() {
			return &ArgTooBigError{Index: i, Size: len(a), Limit: maxArgStrlen(),
				msg: fmt.Sprintf("argument %d is %s, past the kernel's %s limit for one argument (MAX_ARG_STRLEN, execve(2))", i, units.HumanSize(int64(len(a))), units.HumanSize(int64(maxArgStrlen())))}
		}
		total += len(a) + 1 + 8
	}
	for _, kv := range env {
		if len(kv)+1 > maxArgStrlen() {
			k, _, _ := strings.Cut(kv, "=")
			return fmt.Errorf("environment variable %s is %s, past the kernel's %s limit for one string (MAX_ARG_STRLEN, execve(2))", k, units.HumanSize(int64(len(kv))), units.HumanSize(int64(maxArgStrlen())))
		}
		total += len(kv) + 1 + 8
	}
	// A page of slack: the program's path and the proxy's variables.
	if limit := maxArgBytes() - os.Getpagesize(); total > limit {
		return &ArgTooBigError{Index: -1, Size: total, Limit: limit,
			msg: fmt.Sprintf("the command line and environment are %s, past the kernel's %s limit (a quarter of RLIMIT_STACK, execve(2))", units.HumanSize(int64(total)), units.HumanSize(int64(limit)))}
	}
	return nil
}
