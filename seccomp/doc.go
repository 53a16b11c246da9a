// Package seccomp turns a profile's syscall policy into a seccomp filter,
// loads it, and reports what it denied. It is the only importer of
// libseccomp-golang, and only Compile, SyscallNumber and SyscallName use it
// (cgo); Load and Serve, which run inside the sandbox's init, do not.
//
// # Flow
//
//	HOST (before any namespace exists)
//	  p, err := seccomp.Builtin(name)   // "allowlist", "denylist"; "none": nil, nil
//	  f, err := seccomp.Compile(p)      // cached by content; nil policy: nil filter
//	  ... f travels to the init as JSON inside the Spec ...
//	INIT (pid 1, goroutine locked to its thread since the start)
//	  ... drop caps, prctl(PR_SET_NO_NEW_PRIVS) ...
//	  fd, err := seccomp.Load(f)        // this thread only; fd >= 0 if f.Notify
//	  go seccomp.Serve(ctx, fd, f, count, hold)      // another thread
//	  fork+exec the payload from the locked thread, reap it
//	  cancel ctx, wait for Serve, report counts by seccomp.SyscallName(nr)
//
// # API
//
//	type Action string     // ActAllow, ActErrno, ActNotifyErrno, ActKill, ActHold
//	type Op string         // OpIn, OpNotIn, OpMaskedIn, OpAnyBit, OpNoBit, OpMixed
//	type ArgCond struct { Arg int; Op Op; Values []uint64; Mask uint64 }
//	type Rule struct { Names []string; Action Action; Errno int; Args []ArgCond; Why string }
//	type Policy struct { Name string; Default Action; DefaultErrno int; Rules []Rule }
//	func (p *Policy) Validate() error
//	func (p *Policy) String() string   // entry by entry with its reason (sbx profile show)
//
//	const Allowlist, Denylist, None = "allowlist", "denylist", "none"
//	func Builtin(name string) (*Policy, error)
//	func Names() []string
//
//	type Filter struct {
//		Policy       string
//		BPF          []byte      // struct sock_filter[], native byte order
//		Notify       bool        // denials return SECCOMP_RET_USER_NOTIF
//		Errnos       map[int]int // syscall nr -> errno, for notify-errno rules
//		DefaultErrno int         // errno for the default action's notifications
//		Fallback     []byte      // the same policy with plain SECCOMP_RET_ERRNO
//	}
//	func (f *Filter) ErrnoFor(nr int) int
//	func Compile(p *Policy) (*Filter, error)
//	func Load(f *Filter) (listener int, err error)
//	func Serve(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error) error
//	func ServeAndKill(ctx context.Context, listener int, f *Filter, count func(nr int), hold func(pid int) error, killed func(tgid int)) error
//	func SyscallName(nr int) string             // "syscall_N" if unknown
//	func SyscallNumber(name string) (int, error)
//
// # Policies
//
// A policy is data, one reason per entry (gVisor's style): a default action
// and rules naming syscalls, each with an action, an errno and optional
// conditions on arguments. denylist (standard) allows everything but the
// known escape and attack surface; allowlist (strict) allows what CPython
// 3.11 with numpy, pandas and matplotlib and the sandbox init use, read off
// strace of those workloads and of CPython's own regression tests, and
// denies the rest with EPERM. Both answer clone3 with ENOSYS, silently, so
// that glibc falls back to clone, whose flags the filter can see.
//
// Only the native architecture is in a filter: a call through another ABI
// of the machine (int 0x80 into the i386 table, or an x32 number on
// x86_64) kills the process. A notify program sends it to the listener,
// where Serve SIGKILLs the caller and ServeAndKill reports whom (evidence
// a SIGSYS cannot be: any process can send itself one); the fallback
// program kills with SECCOMP_RET_KILL_PROCESS, seen as SIGSYS.
// Compile checks that on every program it makes, whatever libseccomp
// version is linked.
//
// # Reporting denials
//
// A notify-errno denial returns SECCOMP_RET_USER_NOTIF (Linux 5.0,
// seccomp_unotify(2)): the calling thread waits in the kernel while Serve,
// on the listener Load returned, counts the syscall by number and answers
// it with its errno (about 10 µs per denial). Allowed syscalls never reach
// Serve. They do not pay for the length of the program either: the
// kernel's per-syscall cache (Linux 5.11) skips it for syscalls allowed
// whatever their arguments, so these filters cost an allowed syscall what
// a one-rule filter does, the kernel's seccomp entry work (some tens of ns,
// see TestOverhead). Where the kernel gives no listener, Load installs
// Filter.Fallback: the same denials, not reported.
package seccomp
