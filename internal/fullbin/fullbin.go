// Package fullbin holds the full sbx inside the lean one: the inverse
// layout of issue 13. `make sbx` builds package main twice from the same
// sources: first the full sbx, every command, into sbx-full.bin here
// (gitignored), then the sbx that is installed, with -tags
// sbx_lean,sbx_embedfull: it leaves out what only `sbx serve` links
// (package serve, prometheus's client_golang and its protobuf, procfs,
// expvar: 28 package inits, ~1 ms of them, and their pages in every `sbx
// exec`: `sbx --version` 6.0-6.8 -> 4.5-4.9 ms, an exec's own CPU 3-5 ms
// less; docs/DESIGN.md, "The inverse layout") and embeds the full binary
// (embed_on.go). A plain `go build` is the full sbx and embeds nothing
// (embed_off.go).
//
// The lean sbx hands a command only the full sbx has to it (Exec) from
// main, before the CLI parses anything: the image is copied into a
// sealed memfd, by internal/initbin's SealedCopy (the copy and the seals
// of sbx-init's memfd: runc's CVE-2019-5736 is why the file a process
// runs from must be immutable), and exec'd with the same argv and
// environment, so that the full sbx gets the command line, stdin and
// every fd as the user gave them. What the full sbx then does with
// /proc/self/exe, the memfd, works as from a file: its own sbx-init is
// sent from it to a memfd of its own (initbin/selfcopy.go), and the
// KindSelf fallback re-executes it.
//
// The price is paid by the handed-off commands only (`sbx serve`, `sbx
// image`, and since the seventh pass a run on an image, which the lean
// sbx links no support for: engine/image_lean.go), never by an `sbx exec`
// without an image: a copy of the full image (18.7 MB; `sbx serve` starts
// in 24.6 ms instead of 9.9; an image run from the CLI ~23 ms more CPU)
// per start, and the memfd's pages, held for the full sbx's life. A host that refuses exec from a memfd (vm.memfd_noexec=2, an
// LSM) cannot run them; `sbx doctor` says so (Probe).
package fullbin

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/initbin"
)

// MemfdName is the memfd's name: the full sbx's /proc/PID/exe reads
// "/memfd:sbx (deleted)". execveat(2) of the fd (AT_EMPTY_PATH) names
// the process after it too where the kernel does (comm "memfd:sbx" on
// the dev host's 6.18; older kernels use the fd's number, as an execve of
// /proc/self/fd/N does everywhere), which ps, top and pgrep show.
const MemfdName = "sbx"

// Embedded reports whether this build carries the full sbx: the lean sbx
// of `make sbx`.
func Embedded() bool { return len(image) > 0 }

// Size is the embedded full sbx's size in bytes (0 if none).
func Size() int { return len(image) }

// Exec replaces this process by the full sbx, exec'd from a sealed memfd
// with argv and env. It returns only if that failed, with an error that
// names the step, its arguments and the errno, and says what it means
// on this host.
func Exec(argv, env []string) error {
	if !Embedded() {
		return errors.New("this sbx embeds no full sbx to hand the command to (build it with make sbx)")
	}
	// An `sbx exec` handed off (its image is the full sbx's to run) has
	// the lean sbx's memfd copy process under way (internal/initbin,
	// ctorcopy.go): reaped here, or it would stay a zombie child of the
	// full sbx, which knows nothing of it, for as long as that runs.
	initbin.ReleaseCopy()
	return execImage(image, argv, env)
}

// execImage is Exec for an image of any origin (the tests' own).
func execImage(img []byte, argv, env []string) error {
	m, err := initbin.SealedCopy(MemfdName, img)
	if err != nil {
		if m.CopyWhy != "" && m.CopyWhy != err.Error() {
			err = fmt.Errorf("%w (after the sendfile from /proc/self/exe failed: %s)", err, m.CopyWhy)
		}
		return fmt.Errorf("copying the full sbx (%.1f MB) into a sealed memfd: %w%s", mb(len(img)), err, meaning(err, stepMemfd))
	}
	err = execveat(m.FD, argv, env)
	unix.Close(m.FD)
	return fmt.Errorf("running the full sbx (%.1f MB) from its sealed memfd: %w%s", mb(len(img)), err, meaning(err, stepExec))
}

func mb(n int) float64 { return float64(n) / (1 << 20) }

// execveat is execveat(fd, "", argv, env, AT_EMPTY_PATH), fexecve(3):
// the fd itself is exec'd, whatever /proc shows. It restores nothing Go
// changed at start but the close-on-exec fds' closing: the soft
// RLIMIT_NOFILE the runtime raised (syscall/rlimit.go) stays raised in
// the full sbx, which would raise it the same way, and whose only
// children, the sandboxes' inits, give every payload the profile's
// limits.nofile (profiles/spec.go).
func execveat(fd int, argv, env []string) error {
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return fmt.Errorf("execveat: argv: %w", err)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return fmt.Errorf("execveat: environment: %w", err)
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("execveat(memfd %d, \"\", %q, AT_EMPTY_PATH): %w", fd, argv, errno)
}

type step int

const (
	stepMemfd step = iota
	stepExec
)

// meaning says what an errno of the memfd's making or of its exec means
// on this host, and what to do ("" when there is nothing to add).
func meaning(err error, s step) string {
	const sysctl = "vm.memfd_noexec=2 (sysctl vm.memfd_noexec=0 or 1 allows them)"
	switch {
	case s == stepMemfd && errors.Is(err, unix.EACCES):
		return "; this host refuses executable memfds: " + sysctl
	case s == stepMemfd && errors.Is(err, unix.EPERM):
		return "; a seccomp filter or an LSM policy of this process refuses memfd_create(2)"
	case s == stepMemfd && (errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EFBIG)):
		return "; not enough memory for the copy (a memory cgroup's limit, or RLIMIT_FSIZE)"
	case s == stepMemfd && (errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)):
		return "; out of file descriptors"
	case s == stepExec && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)):
		return "; this host refuses to exec from a memfd: an LSM policy, or " + sysctl
	case s == stepExec && errors.Is(err, unix.ENOSYS):
		return "; the kernel has no execveat(2) (Linux 3.19)"
	}
	return ""
}

// Probe tells `sbx doctor` whether the hand-off works here: it runs this
// sbx again (/proc/self/exe) with args, a command the lean sbx hands off,
// which copies the full sbx and execs it as Exec does (so the copy is
// made once more, 18.7 MB: doctor only), and wants it to exit 0 with want
// in its output.
func Probe(args []string, want string) error {
	if !Embedded() {
		return errors.New("this sbx embeds no full sbx")
	}
	var stdout, stderr strings.Builder
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = "sbx"
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if msg := strings.TrimSpace(stderr.String()); err != nil && msg != "" {
		return errors.New(strings.TrimPrefix(msg, "sbx: "))
	}
	if err != nil {
		return fmt.Errorf("sbx %s: %w", strings.Join(args, " "), err)
	}
	if !strings.Contains(stdout.String(), want) {
		return fmt.Errorf("sbx %s printed %q, without %q", strings.Join(args, " "), stdout.String(), want)
	}
	return nil
}
