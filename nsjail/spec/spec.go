package spec

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sbx-sandbox/sbx/rootfs"
	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// SpecVersion is bumped whenever the Spec's wire form changes; the init
// refuses a Spec of another version (supervisor and init are the same
// binary, so this only trips on a replaced binary mid-run).
const SpecVersion = 4

// Spec is everything the init needs to build one sandbox: plain data,
// decided and validated on the host, sent to the init as JSON on fd 3.
// It holds no fds, funcs or host-only state.
type Spec struct {
	Version  int    `json:"version"`
	ID       string `json:"id"`
	Profile  string `json:"profile"`
	Hostname string `json:"hostname"`
	// UID and GID of the sandbox user inside the user namespace; the
	// supervisor maps them onto one unprivileged host uid and gid.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Mounts is the mount plan, replayed in order below the new root.
	Mounts []rootfs.Mount `json:"mounts"`
	// ProcMasks hide or freeze /proc paths (rootfs.ProcMasks). The init
	// applies them after the mount plan and its own /proc/sys writes,
	// before the payload starts. A Spec that mounts a procfs must have
	// them: an unmasked /proc shows the host's memory map and kernel.
	ProcMasks []rootfs.Mount `json:"proc_masks,omitempty"`
	// Workdir is the payload's cwd and HOME (a tmpfs in Mounts).
	Workdir string `json:"workdir"`
	// Env is the payload's whole environment; nothing of the host's.
	Env     []string `json:"env"`
	Rlimits []Rlimit `json:"rlimits"`
	// Outputs bounds the report of the workspace after the run.
	Outputs OutputSpec `json:"outputs"`
	// Proxy asks the init for a listening socket on ProxyAddr, handed to
	// the supervisor (Job.Proxy serves it).
	Proxy bool `json:"proxy,omitempty"`
	// DNS asks the init, before the proxy's socket, for the DNS stub's
	// sockets on DNSStubAddr and one listener for each of Forwards
	// (init_egress_linux.go), handed to the supervisor the same way.
	DNS      bool      `json:"dns,omitempty"`
	Forwards []Forward `json:"forwards,omitempty"`
	// Seccomp names the syscall policy; "none" for none but the init
	// guard (seccomp.ForRun). The
	// compiled filter follows on the control pipe (Confine), since
	// compiling takes milliseconds that the init's set-up can hide.
	Seccomp string `json:"seccomp"`
	// Landlock asks the init for a Landlock ruleset (landlock_linux.go).
	Landlock bool `json:"landlock,omitempty"`
	// Warm asks for the interpreter started ahead of the payload (warm.go).
	Warm *Warm `json:"warm,omitempty"`
	// Session gives the payload the supervisor's session socket as its
	// fd 3 (a SOCK_SEQPACKET pair, nsjail/session_linux.go): the channel
	// of a session driver, beside the payload's stdio. Not with Warm.
	Session bool `json:"session,omitempty"`
	// Nothing of one request lives here (issue 12, item 3): the --env
	// additions, whether file contents are sent and the timings travel
	// with the Payload, so that one Spec serves every request of a
	// profile.
}

// Rlimit is one setrlimit(2) call; Resource is the RLIMIT_* name.
type Rlimit struct {
	Resource string `json:"resource"`
	Soft     uint64 `json:"soft"`
	Hard     uint64 `json:"hard"`
}

// rlimitNames are the setrlimit(2) resources a Spec may set, in
// getrlimit(2)'s order. They are names, not numbers, so that this package
// builds without golang.org/x/sys/unix; the init maps them onto the
// kernel's (nsjail's rlimitResources, held to this list by a test).
var rlimitNames = []string{
	"RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_DATA", "RLIMIT_STACK", "RLIMIT_CORE",
	"RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_AS",
	"RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO",
}

// RlimitNames lists the rlimit resources a Spec may set.
func RlimitNames() []string { return slices.Clone(rlimitNames) }

// Payload is what runs in a sandbox once it is set up. It crosses the
// control pipe after the Spec, so that a sandbox can be built before its
// code is known (the warm pool of `sbx serve`).
type Payload struct {
	// Argv[0] is looked up in the sandbox's PATH when it has no slash.
	Argv []string `json:"argv"`
	// Files are written into the workspace before the payload starts.
	Files []File `json:"files"`
	// Env are this payload's additions to the Spec's environment (sbx
	// exec --env); a key set here replaces the Spec's.
	Env []string `json:"env,omitempty"`
	// Send asks the workspace report to carry the contents of created
	// and modified files (OutputSpec.Send); the supervisor sets it when
	// an output directory takes them.
	Send bool `json:"send,omitempty"`
	// Timings asks the init for its steps' timings; the supervisor sets
	// it from Job.Timings.
	Timings bool `json:"timings,omitempty"`
	// Lower are the limits this payload lowers (warm.go), applied when it
	// is claimed.
	Lower *Lower `json:"lower,omitempty"`
	// CaptureError asks for a Python payload (python3 SCRIPT or -c
	// CODE) to be started by the runner that reports its uncaught
	// exception (Result.Error); the supervisor sets it from Argv.
	CaptureError bool `json:"capture_error,omitempty"`
	// FigureBytes asks the runner for the matplotlib figures a Python
	// payload leaves open (and those it plt.show()s), as PNGs in
	// Result.Results, at most this many bytes of them (the profile's
	// capture_figures: the output cap, at most MaxFigureBytes); 0 asks
	// for none. Only with CaptureError.
	FigureBytes int64 `json:"figure_bytes,omitempty"`
}

// MaxFigureBytes bounds the figures of one run (Payload.FigureBytes), as
// a session bounds one cell's results.
const MaxFigureBytes = 16 << 20

// MaxFigures bounds how many figures one run returns.
const MaxFigures = 64

// File is one input streamed into the workspace. Its Size bytes follow the
// Payload message on the control pipe, in order.
type File struct {
	// Path is relative to the workspace.
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	Size int64  `json:"size"`
	// Source is where the supervisor reads it from; never sent.
	Source string `json:"-"`
	// Data, when set, is the file's bytes, open: the supervisor reads it
	// instead of opening Source, which then only names it (for the
	// Result's inputs). A script sbx read from a pipe is such a file,
	// unlinked so that nothing of it outlives sbx. Never sent.
	Data *os.File `json:"-"`
}

// Validate lists every problem with the Spec, one error per check.
func (s *Spec) Validate() error {
	return errors.Join(checkVersion(s), checkSeccomp(s), checkIdentity(s), checkWorkdir(s), checkProcMasks(s), checkEnv(s.Env), CheckRlimits(s.Rlimits), checkOutputs(s.Outputs), checkWarm(s.Warm), checkSession(s))
}

// checkSession: a session's driver is its own payload, started cold
// (the warm interpreter has no session socket).
func checkSession(s *Spec) error {
	if s.Session && s.Warm != nil {
		return errors.New("session: a session sandbox is not warm (its driver is the payload)")
	}
	return nil
}

// isProcMask reports whether k is one of the kinds of ProcMasks.
func isProcMask(k rootfs.Kind) bool {
	return k == rootfs.KindMaskFile || k == rootfs.KindMaskDir || k == rootfs.KindRebindRO
}

// checkProcMasks keeps the masks and the plan apart (the plan runs below
// the staging root, the masks after pivot_root) and fails closed on a
// procfs without masks.
func checkProcMasks(s *Spec) error {
	var errs []error
	proc := false
	for _, m := range s.Mounts {
		if isProcMask(m.Kind) {
			errs = append(errs, fmt.Errorf("mount plan: %s belongs in proc_masks", m))
		}
		proc = proc || m.Kind == rootfs.KindProc
	}
	for _, m := range s.ProcMasks {
		if !isProcMask(m.Kind) {
			errs = append(errs, fmt.Errorf("proc mask %s: kind %q is not a mask", m, m.Kind))
		}
		if path.Clean(m.Dst) != m.Dst || !strings.HasPrefix(m.Dst, "/proc/") {
			errs = append(errs, fmt.Errorf("proc mask %s: want a clean path below /proc/", m))
		}
	}
	if proc && len(s.ProcMasks) == 0 {
		errs = append(errs, errors.New("the mount plan has a procfs but no proc_masks"))
	}
	return errors.Join(errs...)
}

func checkOutputs(o OutputSpec) error {
	if o.MaxFiles <= 0 || o.MaxBytes < 0 || o.MaxFileBytes < 0 || o.MaxDepth <= 0 || o.MaxHashBytes < 0 {
		return fmt.Errorf("output caps: files %d, bytes %d, file bytes %d, depth %d, hash bytes %d: want positive counts", o.MaxFiles, o.MaxBytes, o.MaxFileBytes, o.MaxDepth, o.MaxHashBytes)
	}
	if o.WalkTimeout <= 0 {
		return fmt.Errorf("output walk timeout %v: want a positive duration", o.WalkTimeout)
	}
	return nil
}

func checkSeccomp(s *Spec) error {
	if slices.Contains(policyname.All(), s.Seccomp) {
		return nil
	}
	return fmt.Errorf("seccomp policy %q: want one of %s", s.Seccomp, strings.Join(policyname.All(), ", "))
}

func checkVersion(s *Spec) error {
	if s.Version != SpecVersion {
		return fmt.Errorf("spec version %d, want %d", s.Version, SpecVersion)
	}
	return nil
}

func checkIdentity(s *Spec) error {
	var errs []error
	if s.UID < 0 || s.UID > 65535 || s.GID < 0 || s.GID > 65535 {
		errs = append(errs, fmt.Errorf("uid %d / gid %d inside: must be within 0..65535", s.UID, s.GID))
	}
	if s.Hostname == "" || len(s.Hostname) > 64 || strings.ContainsAny(s.Hostname, "/ \t\n\x00") {
		errs = append(errs, fmt.Errorf("hostname %q: want 1-64 characters, no spaces or slashes", s.Hostname))
	}
	return errors.Join(errs...)
}

func checkWorkdir(s *Spec) error {
	if !path.IsAbs(s.Workdir) || path.Clean(s.Workdir) != s.Workdir {
		return fmt.Errorf("workdir %q: must be a clean absolute path", s.Workdir)
	}
	for _, m := range s.Mounts {
		if m.Dst == s.Workdir && m.Kind == rootfs.KindTmpfs {
			return nil
		}
	}
	return fmt.Errorf("workdir %s: no tmpfs is planned there", s.Workdir)
}

func checkEnv(env []string) error {
	var errs []error
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.Contains(kv, "\x00") {
			errs = append(errs, fmt.Errorf("env %q: want KEY=VALUE", kv))
		}
	}
	return errors.Join(errs...)
}

// CheckRlimits checks rlimits the init is to set: known resources, soft
// at most hard. The init checks the Confine message's with it too.
func CheckRlimits(rl []Rlimit) error {
	var errs []error
	for _, r := range rl {
		if !slices.Contains(rlimitNames, r.Resource) {
			errs = append(errs, fmt.Errorf("rlimit %s: unknown resource", r.Resource))
		}
		if r.Soft > r.Hard {
			errs = append(errs, fmt.Errorf("rlimit %s: soft %d above hard %d", r.Resource, r.Soft, r.Hard))
		}
	}
	return errors.Join(errs...)
}

// CheckPayload validates what will run: a program and safe workspace paths.
func CheckPayload(p *Payload) error {
	errs := []error{checkEnv(p.Env), checkLower(p.Lower)}
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		errs = append(errs, errors.New("payload: no program to run"))
	}
	seen := map[string]bool{}
	for _, f := range p.Files {
		if err := checkWorkspacePath(f.Path); err != nil {
			errs = append(errs, err)
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("input %s: given twice", f.Path))
		}
		seen[f.Path] = true
		if f.Size < 0 {
			errs = append(errs, fmt.Errorf("input %s: negative size", f.Path))
		}
	}
	return errors.Join(errs...)
}

// checkWorkspacePath accepts a relative path that stays inside the
// workspace: no leading slash, no "..", nothing that cleans differently.
func checkWorkspacePath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("input destination %q: must be a clean relative path inside the workspace", p)
	}
	return nil
}
