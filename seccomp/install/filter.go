package install

import (
	"slices"

	"golang.org/x/sys/unix"
)

// Filter is a compiled policy: plain data that crosses from the host to the
// sandbox's init as JSON, and that Load installs without libseccomp.
// Compile caches filters and hands the same one to every caller: treat it
// as read-only.
type Filter struct {
	// Policy is the name of the policy it was compiled from.
	Policy string `json:"policy"`
	// BPF is the program, struct sock_filter[] in native byte order, as
	// seccomp(SECCOMP_SET_MODE_FILTER) takes it.
	BPF []byte `json:"bpf"`
	// Notify says the program answers denials with SECCOMP_RET_USER_NOTIF:
	// Load asks for a listener, and Serve must answer on it.
	Notify bool `json:"notify"`
	// Errnos maps the number of each syscall that a notify-errno rule
	// denies to the errno Serve answers with.
	Errnos map[int]int `json:"errnos,omitempty"`
	// DefaultErrno is Serve's answer for any other notified syscall
	// (those the policy's default denies).
	DefaultErrno int `json:"default_errno,omitempty"`
	// Holds are the numbers of the syscalls a hold rule names: Serve
	// runs its hold callback and lets them continue (ActHold).
	Holds []int `json:"holds,omitempty"`
	// Fallback is the same policy with every notify-errno turned into a
	// plain SECCOMP_RET_ERRNO. Load installs it when the kernel will not
	// give a listener, so denials still fail the same way, unreported.
	Fallback []byte `json:"fallback,omitempty"`
}

// ErrnoFor is the errno a notified syscall nr must fail with; it never
// returns 0, since answering 0 would make a denied syscall succeed.
func (f *Filter) ErrnoFor(nr int) int {
	if e, ok := f.Errnos[nr]; ok && validErrno(e) {
		return e
	}
	if validErrno(f.DefaultErrno) {
		return f.DefaultErrno
	}
	return int(unix.EPERM)
}

func validErrno(e int) bool { return e > 0 && e <= 4095 }

// IsHold reports whether a notification for syscall nr is a hold.
func (f *Filter) IsHold(nr int) bool { return slices.Contains(f.Holds, nr) }
