// Package initbin holds the sandbox init as a binary of its own: sbx-init
// (cmd/sbx-init), a static Go program without cgo that links only the
// init's side of nsjail (issue 13). `make sbx` builds it first into
// sbx-init.bin here (gitignored) and then builds sbx with -tags
// sbx_embedinit, which embeds it (embed_on.go). A plain `go build` has
// no image (embed_off.go) and the supervisor re-executes /proc/self/exe,
// the whole sbx binary, as before.
//
// Why a second binary at all: every sandbox's init is a fresh process,
// and re-executing the 16 MB sbx binary paid, in each, the static glibc's
// start (its CPUID cache probe traps to the hypervisor), a second Go
// runtime start with ~140 package inits (prometheus, go-containerregistry,
// protobuf, compress ...) and the mapped pages of all of it.
//
// Why a memfd: the image must be somewhere the kernel can exec it from,
// and nothing a sandbox does may change what the next sandbox runs. runc's
// CVE-2019-5736 was exactly that: a container opened /proc/PID/exe of
// runc's process and overwrote the host's runc binary. Exe copies the
// image once per process into a memfd and seals it (F_SEAL_SEAL,
// F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE: memfd_create(2), fcntl(2)
// "File Sealing"), so the file is immutable for everyone, root included,
// for as long as it exists; no file on disk is involved.
package initbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kind says which init a sandbox runs.
type Kind string

const (
	// KindMemfd: sbx-init, from the sealed memfd.
	KindMemfd Kind = "sbx-init"
	// KindSelf: the sbx binary itself re-executed (/proc/self/exe),
	// because this build embeds no sbx-init or the memfd failed.
	KindSelf Kind = "self"
)

// Exe is where the supervisor execs a sandbox's init from.
type Exe struct {
	Kind Kind
	// Path is what execve(2) gets: /proc/self/fd/N of the sealed memfd,
	// or /proc/self/exe.
	Path string
	// Size is the image's size in bytes (0 for KindSelf).
	Size int
	// Why says why a build that embeds sbx-init runs KindSelf; empty
	// otherwise.
	Why string
	// Copy says how the memfd was filled (KindMemfd only).
	Copy Copy
	// CopyWhy says why the sendfile from /proc/self/exe failed, where
	// Copy is CopyWrite (or, with KindSelf, before the write failed too).
	CopyWhy string
	// Started says where an `sbx exec` started the copy (early.go);
	// empty when the first sandbox's set-up did.
	Started Start
	// EarlyWhy says why the copy process the C constructors forked
	// (ctorcopy.go) did not make the memfd, where an `sbx exec` of a cgo
	// build tried it and Go copied instead.
	EarlyWhy string
	// SealedNS is when the memfd was sealed, on CLOCK_MONOTONIC (the
	// clock of --debug-timings).
	SealedNS int64
}

// Start says where an `sbx exec` started the memfd's copy.
type Start string

const (
	// StartBeforeMain: from this package's init (one P).
	StartBeforeMain Start = "started before main"
	// StartAtMain: from main, first thing (PrepareForExec; two Ps).
	StartAtMain Start = "started at main"
	// StartInConstructor: by a process the C constructors forked,
	// before Go's runtime, sent the image's offset from this package's
	// init (ctorcopy.go).
	StartInConstructor Start = "by a process the C constructors forked"
)

// Copy says how the memfd got the image.
type Copy string

const (
	// CopySendfile: sendfile(2) from this executable's own file
	// (selfcopy.go).
	CopySendfile Copy = "sendfile from /proc/self/exe"
	// CopyWrite: write(2) from the embedded bytes, where the sendfile
	// failed; CopyWhy says why.
	CopyWrite Copy = "write"
)

// Describe is Exe in a phrase, for the Result's layers, doctor and
// --debug-timings.
func (e Exe) Describe() string {
	switch {
	case e.Kind == KindMemfd:
		return fmt.Sprintf("sbx-init (%.1f MB static, no cgo), from a sealed memfd", float64(e.Size)/(1<<20))
	case e.Why != "" && e.CopyWhy != "" && e.CopyWhy != e.Why:
		return "sbx itself re-executed (/proc/self/exe): " + e.Why + " (after the sendfile from /proc/self/exe failed: " + e.CopyWhy + ")"
	case e.Why != "":
		return "sbx itself re-executed (/proc/self/exe): " + e.Why
	}
	return "sbx itself re-executed (/proc/self/exe): this build embeds no sbx-init"
}

// Argv0 is the init's argv[0], what ps shows: "sbx-init", or "sbx".
func (e Exe) Argv0() string {
	if e.Kind == KindMemfd {
		return "sbx-init"
	}
	return "sbx"
}

// Embedded reports whether this build carries the sbx-init image.
func Embedded() bool { return len(image) > 0 }

var selfExe = Exe{Kind: KindSelf, Path: "/proc/self/exe"}

// Prepare starts making the memfd in the background, so that the copy
// (~3 MB: a millisecond or so) overlaps the supervisor's other set-up;
// Get waits for it. Calling it again does nothing.
func Prepare() {
	if Embedded() && prepared.CompareAndSwap(false, true) {
		go once.Do(makeMemfd)
	}
}

// prepared: Prepare started the copy already (it is called from main
// and from every sandbox's set-up).
var prepared atomic.Bool

// Get returns the init to exec: the sealed memfd when this build embeds
// sbx-init and the memfd could be made, else /proc/self/exe. The memfd is
// made once per process and kept open for the process's life: every
// sandbox of a `sbx serve` execs the same one.
func Get() Exe {
	if !Embedded() {
		return selfExe
	}
	once.Do(makeMemfd)
	return memfd
}

var (
	once  sync.Once
	memfd Exe
)

func makeMemfd() {
	if startedAt == StartInConstructor {
		m, err := early.finish(image)
		if err == nil {
			dropPages(image)
			memfd = Exe{Kind: KindMemfd, Path: m.Path, Size: len(image), Copy: m.Copy, Started: startedAt, SealedNS: monotonicNS()}
			return
		}
		// Copied from Go now, as the first sandbox's set-up would.
		earlyWhy, startedAt = err.Error(), ""
	}
	m, err := SealedCopy("sbx-init", image)
	if err != nil {
		memfd = Exe{Kind: KindSelf, Path: "/proc/self/exe", Why: err.Error(), CopyWhy: m.CopyWhy, EarlyWhy: earlyWhy}
		return
	}
	dropPages(image)
	memfd = Exe{Kind: KindMemfd, Path: m.Path, Size: len(image), Copy: m.Copy, CopyWhy: m.CopyWhy, EarlyWhy: earlyWhy, Started: startedAt, SealedNS: monotonicNS()}
}

// ReleaseCopy reaps the constructor's copy process (ctorcopy.go) of an
// `sbx exec` that ends without having made a sandbox (a usage error, a
// failed pull), so that no zombie of it is left to a subreaper; main
// calls it before it exits, and internal/fullbin before it execs the full
// sbx. Once Get has run it does nothing, and Get after it returns
// /proc/self/exe.
func ReleaseCopy() {
	if startedAt != StartInConstructor {
		return
	}
	once.Do(func() {
		early.release()
		memfd = Exe{Kind: KindSelf, Path: "/proc/self/exe", Why: "the process is exiting"}
	})
}

// Memfd is an image embedded in this executable, copied into a sealed
// memfd by SealedCopy.
type Memfd struct {
	// FD is the memfd: close-on-exec, numbered fdFloor or above.
	FD int
	// Path is /proc/self/fd/FD, what execve(2) gets.
	Path string
	// Copy says how the memfd was filled; CopyWhy why the sendfile from
	// /proc/self/exe failed, where it did (also when the write failed
	// too and SealedCopy returns an error).
	Copy    Copy
	CopyWhy string
}

// SealedCopy copies img, bytes this executable embeds (a go:embed
// variable, so that they lie in its file: selfcopy.go), into a fresh
// memfd named name, and seals it (see the package comment and seals):
// by sendfile(2) from /proc/self/exe, else by write(2) from img. Both
// embedded images are copied here: sbx-init for every sandbox's init
// (Get), and the full sbx, which the lean sbx hands its other commands
// to (internal/fullbin). A build run from a memfd itself (the full sbx
// exec'd by the lean one) copies from that memfd: /proc/self/exe is then
// the sealed memfd, which holds this executable as well.
func SealedCopy(name string, img []byte) (Memfd, error) {
	how, why := CopySendfile, ""
	fd, err := sealedMemfdFilled(name, img, copyFromSelf)
	if err != nil {
		// Not a failure: the image's own bytes are as good, only
		// dearer to copy (an unreadable binary, mode 0111; a packed one).
		// The reason is kept: --debug-timings shows it beside the copy.
		how, why = CopyWrite, err.Error()
		fd, err = sealedMemfd(name, img)
	}
	if err != nil {
		return Memfd{FD: -1, CopyWhy: why}, err
	}
	return Memfd{FD: fd, Path: fmt.Sprintf("/proc/self/fd/%d", fd), Copy: how, CopyWhy: why}, nil
}

func monotonicNS() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// dropPages takes the image's pages out of this process's memory once
// they are copied (madvise(2) MADV_DONTNEED): the image is read once, and
// would otherwise stay in the supervisor's RSS for its life. Only whole
// pages inside the image are dropped; they are never written, so a later
// read (none is made) would fault the same bytes in again from the
// binary.
func dropPages(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	end := start + uintptr(len(b))
	first, last := (start+page-1)&^(page-1), end&^(page-1)
	if last <= first {
		return
	}
	whole := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), first-start)), last-first)
	_ = unix.Madvise(whole, unix.MADV_DONTNEED) // only a saving: nothing to do if refused
}

// notInitMsg is what sbx-init says when it is not a sandbox's pid 1
// (cmd/sbx-init), with exit status 2.
const notInitMsg = "sbx-init: this is the sandbox init"

// Probe execs e outside any sandbox, where sbx-init only says it is not
// an init and exits 2: it tells `sbx doctor` whether the kernel (an LSM,
// a noexec policy) lets this process exec from the memfd, which every
// sandbox would otherwise find out by failing to start.
func (e Exe) Probe() error {
	if e.Kind != KindMemfd {
		return nil
	}
	var stderr strings.Builder
	cmd := exec.Command(e.Path)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 && strings.HasPrefix(stderr.String(), notInitMsg) {
		return nil
	}
	if err == nil {
		err = errors.New("exited 0")
	}
	return fmt.Errorf("exec %s: %w %s", e.Path, err, strings.TrimSpace(stderr.String()))
}

// fdFloor is the lowest fd number the memfd may have. The init's start
// (sbx_spawn, or os/exec) dup2s the files it passes onto fds 0..n-1
// before it execs the path (syscall/exec_linux.go, forkAndExecInChild1,
// pass 2): a memfd on a low number could be overwritten there, and the
// child would exec whatever that is (it would fail, but fail it must
// not). sbx passes fewer than ten files. The floor does not keep it out
// of the moves of pass 1, which go to one past the highest passed fd and
// up, wherever a busy server's fds are: those steer clear of the path's
// fd themselves (nsjail: spawn_linux.c's path_fd, startWithOSExec).
const fdFloor = 100

// sealedMemfd is memfd_create, write, F_ADD_SEALS, each named in its
// error. The fd is close-on-exec: the kernel resolves /proc/self/fd/N
// before execve closes it, and no sandbox process ever holds it.
func sealedMemfd(name string, img []byte) (int, error) {
	return sealedMemfdFilled(name, img, writeAll)
}

// sealedMemfdFilled is sealedMemfd with the copy made by fill: a fill
// that fails leaves nothing behind, and the caller may try another on a
// fresh memfd.
func sealedMemfdFilled(name string, img []byte, fill func(fd int, img []byte) error) (int, error) {
	fd, err := memfdCreate(name)
	if err != nil {
		return -1, err
	}
	if err := fill(fd, img); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return sealHigh(fd)
}

// sealHigh seals the filled memfd fd and moves it to fdFloor or above
// (close-on-exec); fd is closed either way.
func sealHigh(fd int) (int, error) {
	if err := addSeals(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, fdFloor)
	unix.Close(fd)
	if err != nil {
		return -1, fmt.Errorf("fcntl(memfd, F_DUPFD_CLOEXEC, %d): %w", fdFloor, err)
	}
	return high, nil
}

// memfdCreate is memfd_create(name, MFD_CLOEXEC|MFD_ALLOW_SEALING|
// MFD_EXEC). MFD_EXEC (Linux 6.3) says the file is meant to be executed,
// which vm.memfd_noexec=1 would otherwise refuse it; before 6.3 it is
// EINVAL, and the call is made again without it (such kernels exec any
// memfd).
func memfdCreate(name string) (int, error) {
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create(%q, MFD_CLOEXEC|MFD_ALLOW_SEALING|MFD_EXEC): %w", name, err)
	}
	return fd, nil
}

func writeAll(fd int, b []byte) error {
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write memfd (%d of %d bytes written): %w", off, len(b), err)
		}
		off += n
	}
	return nil
}

// seals make the memfd immutable: no write, no truncation either way,
// and no change of the seals themselves (F_SEAL_SEAL). F_SEAL_WRITE needs
// no writable mapping of the file to exist (EBUSY), and there is none.
const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

func addSeals(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("fcntl(memfd, F_ADD_SEALS, F_SEAL_SEAL|F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_WRITE): %w", err)
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("fcntl(memfd, F_GET_SEALS): %w", err)
	}
	if got&seals != seals {
		return fmt.Errorf("fcntl(memfd, F_GET_SEALS) = %#x, want %#x set", got, seals)
	}
	return nil
}
