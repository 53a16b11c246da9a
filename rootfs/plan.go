// Package rootfs decides what the sandbox sees as "/": which host paths are
// bound read-only, which tmpfs mounts exist, and the synthetic /etc. The
// result is a mount plan — plain data — that the init inside the namespaces
// replays step by step (bubblewrap's SetupOp list, as data). Every decision
// is taken here, on the host, before any namespace exists.
package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Kind says what one Mount step does.
type Kind string

const (
	// KindBind bind-mounts the host path Src on Dst. Binds before the
	// KindSeal step become read-only there; the device nodes after it
	// stay writable (writing a character device needs no writable mount).
	KindBind Kind = "bind"
	// KindTmpfs mounts a fresh tmpfs on Dst with Size bytes and Inodes
	// inodes, owned by the sandbox user, with permissions Mode.
	KindTmpfs Kind = "tmpfs"
	// KindProc mounts a procfs of the sandbox's pid namespace on Dst.
	KindProc Kind = "proc"
	// KindSymlink creates Dst as a symlink to Src.
	KindSymlink Kind = "symlink"
	// KindFile creates Dst holding Data, with permissions Mode.
	KindFile Kind = "file"
	// KindDir creates Dst as a directory with permissions Mode.
	KindDir Kind = "dir"
	// KindRemountRO makes the mount at Dst read-only once it is populated
	// (the synthetic /dev).
	KindRemountRO Kind = "remount-ro"
	// KindSeal makes Dst and every mount below it read-only, nosuid and
	// nodev in one step: the root and all the binds made so far.
	KindSeal Kind = "seal"
	// KindDevpts mounts a private devpts instance on Dst: the sandbox's
	// own pseudo-terminals, numbered from 0, invisible to the host's.
	KindDevpts Kind = "devpts"
	// KindMaskFile hides the file Dst under a bind of /dev/null: it reads
	// as empty and writes go nowhere (runc's maskPath).
	KindMaskFile Kind = "mask-file"
	// KindMaskDir hides the directory Dst under an empty read-only tmpfs
	// (runc's maskPath for directories).
	KindMaskDir Kind = "mask-dir"
	// KindRebindRO binds Dst on itself read-only (runc's readonlyPath).
	//
	// The three mask kinds skip a Dst that does not exist (not every
	// kernel has every /proc file); any other failure is fatal.
	KindRebindRO Kind = "rebind-ro"
)

// Mount is one step of the plan. Dst is absolute, inside the new root.
type Mount struct {
	Kind Kind   `json:"kind"`
	Src  string `json:"src,omitempty"`
	Dst  string `json:"dst"`
	// Data is the file's content (KindFile) or the mount options
	// (KindDevpts).
	Data   string `json:"data,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Inodes int64  `json:"inodes,omitempty"`
	NoExec bool   `json:"noexec,omitempty"`
}

func (m Mount) String() string {
	switch m.Kind {
	case KindBind, KindSymlink:
		return fmt.Sprintf("%s %s -> %s", m.Kind, m.Src, m.Dst)
	default:
		return fmt.Sprintf("%s %s", m.Kind, m.Dst)
	}
}

// Identity is who the sandbox user is, for /etc/passwd and /etc/group.
type Identity struct {
	UID, GID int
	Hostname string
	Home     string
}

// Options are the inputs of a plan.
type Options struct {
	// Rootfs is a directory tree to use as "/". Empty means the host:
	// its /usr and the /bin, /lib*, /sbin that sit beside it.
	Rootfs string
	// Workspace is the sandbox's working directory (a tmpfs).
	Workspace       string
	WorkspaceSize   int64
	WorkspaceInodes int64
	TmpSize         int64
	TmpInodes       int64
	ShmSize         int64
	// EtcFromRootfs lists paths below the rootfs's /etc that the synthetic
	// /etc takes over read-only (ld.so.cache, CA certificates, ...).
	EtcFromRootfs []string
	// ROBinds are extra host paths bound read-only: "SRC" at the same
	// path, or "SRC:DEST" at DEST (SplitBind).
	ROBinds []string
	// Nameserver, when set, is the DNS stub's address inside the sandbox
	// (network allowed): resolv.conf names it and nsswitch asks it.
	Nameserver string
	Identity
}

// hostTop lists the top-level entries that make a host-derived root:
// /usr itself and the directories or merged-usr symlinks beside it.
var hostTop = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// HostTop is hostTop, for what must know which host paths a host-derived
// root shows (the interpreter the Result names).
func HostTop() []string { return append([]string(nil), hostTop...) }

// synthesized are the top-level names the plan always provides itself;
// they are never taken from a directory rootfs.
var synthesized = map[string]bool{
	"etc": true, "dev": true, "proc": true, "sys": true, "tmp": true,
	"run": true, "workspace": true, "home": true, "root": true, "var": true,
	"mnt": true, "media": true, "boot": true, "lost+found": true, "srv": true,
}

// Plan returns the ordered mount plan. It reads the host (lstat, readlink)
// but changes nothing. The order matters: everything read-only first (the
// rootfs binds, /etc, the rootfs's symlinks, the mount points of what
// follows), then one KindSeal step makes all of it read-only, then the
// sandbox's own mounts (/dev, /proc, /tmp, the workspace) go on top.
func Plan(o Options) ([]Mount, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	src := o.Rootfs
	if src == "" {
		src = "/"
	}
	top, err := topLevel(o.Rootfs)
	if err != nil {
		return nil, err
	}
	var plan []Mount
	for _, name := range top {
		p := filepath.Join(src, name)
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("rootfs: lstat %s: %w", p, err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, fmt.Errorf("rootfs: readlink %s: %w", p, err)
			}
			plan = append(plan, Mount{Kind: KindSymlink, Src: target, Dst: "/" + name})
		case fi.IsDir():
			plan = append(plan, Mount{Kind: KindBind, Src: p, Dst: "/" + name})
		}
	}
	if !hasBind(plan) {
		return nil, fmt.Errorf("rootfs: %s holds no directory to use as the root (want usr, bin, lib, ...)", src)
	}
	// Symlinks first among the root's entries would let a bind resolve
	// through one; binds come before them.
	sortBindsFirst(plan)
	for _, b := range o.ROBinds {
		src, dst := SplitBind(b)
		if err := checkBindDest(src, dst, top, o.ROBinds); err != nil {
			return nil, err
		}
		plan = append(plan, Mount{Kind: KindBind, Src: src, Dst: dst})
	}
	plan = append(plan, etcPlan(src, o)...)
	for _, d := range []string{"/dev", "/proc", "/tmp", o.Workspace} {
		plan = append(plan, Mount{Kind: KindDir, Dst: d, Mode: 0o755})
	}
	plan = append(plan, Mount{Kind: KindSeal, Dst: "/"})
	plan = append(plan, devPlan(o.ShmSize)...)
	return append(plan,
		Mount{Kind: KindProc, Dst: "/proc"},
		Mount{Kind: KindTmpfs, Dst: "/tmp", Mode: 0o1777, Size: o.TmpSize, Inodes: o.TmpInodes},
		Mount{Kind: KindTmpfs, Dst: o.Workspace, Mode: 0o755, Size: o.WorkspaceSize, Inodes: o.WorkspaceInodes},
	), nil
}

func hasBind(plan []Mount) bool {
	for _, m := range plan {
		if m.Kind == KindBind {
			return true
		}
	}
	return false
}

// sortBindsFirst moves the binds before the symlinks, keeping each group's
// order.
func sortBindsFirst(plan []Mount) {
	var binds, links []Mount
	for _, m := range plan {
		if m.Kind == KindBind {
			binds = append(binds, m)
		} else {
			links = append(links, m)
		}
	}
	copy(plan, append(binds, links...))
}

func checkOptions(o Options) error {
	var errs []error
	if o.Rootfs != "" {
		fi, err := os.Lstat(o.Rootfs)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--rootfs %s: %w", o.Rootfs, err))
		case !fi.IsDir():
			errs = append(errs, fmt.Errorf("--rootfs %s: not a directory", o.Rootfs))
		case !filepath.IsAbs(o.Rootfs):
			errs = append(errs, fmt.Errorf("--rootfs %s: must be an absolute path", o.Rootfs))
		}
	}
	if !filepath.IsAbs(o.Workspace) || path.Clean(o.Workspace) != o.Workspace || o.Workspace == "/" {
		errs = append(errs, fmt.Errorf("workspace %q: must be a clean absolute path below /", o.Workspace))
	} else if top := strings.Split(o.Workspace, "/")[1]; !synthesized[top] {
		// A workspace inside /usr or /bin would mount over the rootfs.
		errs = append(errs, fmt.Errorf("workspace %q: must not lie inside the rootfs (use e.g. /workspace or /home/...)", o.Workspace))
	} else if top == "etc" || top == "dev" || top == "proc" || top == "tmp" {
		errs = append(errs, fmt.Errorf("workspace %q: /%s is owned by the sandbox", o.Workspace, top))
	}
	for _, b := range o.ROBinds {
		src, dst := SplitBind(b)
		if !isCleanAbs(src) || !isCleanAbs(dst) {
			errs = append(errs, fmt.Errorf("read-only bind %q: SRC and DEST must be clean absolute paths", b))
			continue
		}
		if _, err := os.Stat(src); err != nil {
			errs = append(errs, fmt.Errorf("read-only bind %s: %w", src, err))
		}
		if top := strings.Split(dst, "/")[1]; top == "proc" || top == "dev" || top == "etc" || top == "tmp" || dst == o.Workspace {
			errs = append(errs, fmt.Errorf("read-only bind %s: /%s is owned by the sandbox", b, top))
		}
	}
	for _, name := range []struct {
		what string
		v    int64
	}{{"workspace size", o.WorkspaceSize}, {"workspace inodes", o.WorkspaceInodes}, {"tmp size", o.TmpSize}, {"tmp inodes", o.TmpInodes}, {"shm size", o.ShmSize}} {
		if name.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name.what, name.v))
		}
	}
	return errors.Join(errs...)
}

// topLevel lists the rootfs entries to take: the host's usr and its
// neighbours, or everything at the top of a directory rootfs except the
// names the sandbox provides itself.
func topLevel(dir string) ([]string, error) {
	if dir == "" {
		return hostTop, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rootfs: read %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if !synthesized[e.Name()] {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// SplitBind reads a read-only bind "SRC[:DEST]": DEST is SRC when not
// given.
func SplitBind(b string) (src, dst string) {
	src, dst, ok := strings.Cut(b, ":")
	if !ok || dst == "" {
		dst = src
	}
	return src, dst
}

func isCleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p && p != "/" }

// checkBindDest refuses a DEST other than SRC where making its mount point
// would write to a host directory: inside the root's own entries (the
// host's /usr, a directory rootfs's top), or below another bind. A bind at
// its own path needs no new mount point: SRC is there. Elsewhere the
// mount point is made in the staging root, a tmpfs that dies with the run.
func checkBindDest(src, dst string, top, binds []string) error {
	if src == dst {
		return nil
	}
	first := strings.Split(dst, "/")[1]
	for _, t := range top {
		if t == first {
			return fmt.Errorf("read-only bind %s:%s: /%s is the sandbox's root (bound from the host or the rootfs), where its mount point cannot be made; bind to a new path such as /data or /mnt/NAME", src, dst, first)
		}
	}
	for _, b := range binds {
		_, other := SplitBind(b)
		if other != dst && strings.HasPrefix(dst, other+"/") {
			return fmt.Errorf("read-only bind %s:%s: below the bind at %s, where its mount point cannot be made; bind to a path outside it", src, dst, other)
		}
	}
	return nil
}
