package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Controllers sbx uses. On v2 "cpu" is only needed for cpu.max: CPU usage
// (cpu.stat usage_usec) and cgroup.kill exist in every v2 cgroup, with or
// without controllers (cgroup-v2.rst, "Core Interface Files").
var (
	v2Controllers = []string{"cpu", "memory", "pids"}
	v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}
)

// supervisorPrefix names the leaf cgroup sbx moves itself into on v2 when
// the cgroup it was started in holds processes (see doc.go). It starts with
// "sbx-" so that CleanupStale removes it once its process has exited.
const supervisorPrefix = "sbx-supervisor-"

// hierarchy is one mounted cgroup hierarchy as seen from sbx: where it is
// mounted and which directory is the cgroup sbx was started in.
type hierarchy struct {
	controllers []string // v1: the controllers of this mount that sbx uses; v2: nil
	mount       string   // mount point, e.g. /sys/fs/cgroup/memory
	base        string   // the parent of every sandbox cgroup: sbx's own cgroup
	// v1 only: base's path as /proc/self/cgroup names it (the thread's
	// own line is compared with it before JoinThread, thread.go).
	cgroupPath string
	// v2 only: the cgroup sbx is in right now; base, or a sbx-supervisor-*
	// leaf below it (ours after a move, or an ancestor sbx's we inherited).
	own string
}

// layout is what Probe and New work from, found once per process: the
// mounts do not change under a running sbx, and on v2 sbx itself may move
// into a leaf afterwards, which must not change the base.
type layout struct {
	mode    Mode
	v2      hierarchy
	v2Avail []string // controllers of v2Controllers listed in base/cgroup.controllers
	v1      []hierarchy
	// v1Skipped: controllers whose hierarchy exists but cannot be written.
	v1Skipped map[string]error
	why       error // ModeNone: the reason, wrapping ErrUnavailable
}

var (
	layoutMu     sync.Mutex
	cachedLayout *layout
)

// Prefetch starts the layout's discovery on a goroutine of its own, for a
// process that is about to make a Group (`sbx exec`, from main, before the
// CLI parses anything): reading /proc/self/cgroup and mountinfo and
// checking the bases (faccessat) then overlaps the flags, the profile and
// the Spec on another P instead of lying on the path to the clone, which
// waits for the Group (New, then the v1 thread move). New, Probe and
// CleanupStale wait for it (layoutMu) and use its result; a failure to
// read /proc is not cached, so New reads again and returns that error
// itself.
func Prefetch() { go currentLayout() }

// currentLayout discovers the layout on first use and caches it. Errors
// reading /proc are not cached: they are not a property of the host.
func currentLayout() (*layout, error) {
	layoutMu.Lock()
	defer layoutMu.Unlock()
	if cachedLayout != nil {
		return cachedLayout, nil
	}
	l, err := discover()
	if err != nil {
		return nil, err
	}
	cachedLayout = l
	return l, nil
}

func discover() (*layout, error) {
	// readFile, not os.ReadFile: no fstat and no epoll registration, and
	// the errors already name the file.
	pc, err := readFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	mi, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := parseProcCgroup(pc)
	if err != nil {
		return nil, err
	}
	mounts, err := parseMountinfo(mi)
	if err != nil {
		return nil, err
	}
	v2, v1 := resolve(own, mounts)
	return decide(v2, v1), nil
}

// decide picks the mode. v2 wins when its cgroup offers one of the
// controllers sbx uses, or when there is no v1 hierarchy at all (a pure v2
// host whose delegation gave no controllers still offers cgroup.kill and
// CPU accounting). On a hybrid host the v2 mount usually has no controllers
// (they are bound to v1; at most e.g. hugetlb), so v1 is used. Mixing the
// two (pids on v2, memory on v1) is not supported.
func decide(v2 *hierarchy, v1 []hierarchy) *layout {
	l := &layout{v1Skipped: map[string]error{}}
	if v2 != nil {
		avail, err := availableV2(v2.base)
		if err == nil && (len(avail) > 0 || len(v1) == 0) {
			if err := writableDir(v2.base); err != nil {
				l.mode = ModeNone
				l.why = fmt.Errorf("%w: cgroup2 %s: %v", ErrUnavailable, v2.base, err)
				return l
			}
			l.mode, l.v2, l.v2Avail = ModeV2, *v2, avail
			return l
		}
		if err != nil && len(v1) == 0 {
			l.mode, l.why = ModeNone, fmt.Errorf("%w: %v", ErrUnavailable, err)
			return l
		}
	}
	for _, h := range v1 {
		if err := writableDir(h.base); err != nil {
			for _, c := range h.controllers {
				l.v1Skipped[c] = fmt.Errorf("cgroup1 %s: %w", h.base, err)
			}
			continue
		}
		l.v1 = append(l.v1, h)
	}
	if len(l.v1) > 0 {
		l.mode = ModeV1
		return l
	}
	l.mode = ModeNone
	switch {
	case len(l.v1Skipped) > 0:
		var dirs []string
		var cause error
		for _, h := range v1 {
			dirs = append(dirs, h.base)
			cause = writableDir(h.base)
		}
		l.why = fmt.Errorf("%w: cgroup1: cannot create cgroups in %s (%v)", ErrUnavailable, strings.Join(dirs, ", "), errors.Unwrap(cause))
	case v2 != nil:
		l.why = fmt.Errorf("%w: cgroup2 %s offers none of %s and no cgroup1 hierarchy is mounted", ErrUnavailable, v2.base, strings.Join(v2Controllers, ", "))
	default:
		l.why = fmt.Errorf("%w: no cgroup hierarchy of this process is mounted (see /proc/self/cgroup and /proc/self/mountinfo)", ErrUnavailable)
	}
	return l
}

// availableV2 lists the controllers sbx uses that the parent of base has
// delegated to it (base/cgroup.controllers, cgroup-v2.rst "Enabling and
// Disabling").
func availableV2(base string) ([]string, error) {
	b, err := readFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range strings.Fields(string(b)) {
		if slices.Contains(v2Controllers, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out, nil
}

// writableDir checks that this process may create cgroups in dir, with its
// effective ids and capabilities (AT_EACCESS), without creating anything.
func writableDir(dir string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("access %s (W_OK|X_OK): %w", dir, err)
	}
	return nil
}

// procCgroup is /proc/self/cgroup parsed: the v2 path ("0::/a/b") and the
// path of each v1 controller ("4:memory:/a", "2:cpu,cpuacct:/").
type procCgroup struct {
	v2     string
	hasV2  bool
	v1Path map[string]string
}

func parseProcCgroup(b []byte) (procCgroup, error) {
	pc := procCgroup{v1Path: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return pc, fmt.Errorf("parse /proc/self/cgroup: bad line %q", line)
		}
		if parts[0] == "0" && parts[1] == "" {
			pc.v2, pc.hasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			pc.v1Path[c] = parts[2]
		}
	}
	return pc, nil
}

// cgroupMount is one cgroup or cgroup2 line of /proc/self/mountinfo.
type cgroupMount struct {
	v2          bool
	root        string   // the cgroup the mount shows as its root (field 4)
	mountpoint  string   // field 5
	controllers []string // v1: super options that are controller names
}

// parseMountinfo keeps the cgroup mounts of /proc/self/mountinfo
// (Documentation/filesystems/proc.rst, "/proc/<pid>/mountinfo").
func parseMountinfo(b []byte) ([]cgroupMount, error) {
	var out []cgroupMount
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if len(line) == 0 {
			continue
		}
		left, right, ok := bytes.Cut(line, []byte(" - "))
		if !ok {
			return nil, fmt.Errorf("parse /proc/self/mountinfo: no separator in %q", line)
		}
		// Only the cgroup lines are split up: the file lists every mount
		// of the namespace, and this runs once per sbx exec.
		rf := strings.Fields(string(right))
		if len(rf) < 3 {
			return nil, fmt.Errorf("parse /proc/self/mountinfo: short line %q", line)
		}
		var m cgroupMount
		switch rf[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(rf[2], ",") {
				if slices.Contains(v1Controllers, o) {
					m.controllers = append(m.controllers, o)
				}
			}
			if len(m.controllers) == 0 {
				continue // name=systemd, or controllers sbx does not use
			}
		default:
			if bytes.Count(left, []byte(" ")) < 4 {
				return nil, fmt.Errorf("parse /proc/self/mountinfo: short line %q", line)
			}
			continue
		}
		lf := strings.Fields(string(left))
		if len(lf) < 5 {
			return nil, fmt.Errorf("parse /proc/self/mountinfo: short line %q", line)
		}
		m.root, m.mountpoint = unescapeMountinfo(lf[3]), unescapeMountinfo(lf[4])
		out = append(out, m)
	}
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// inMount maps a cgroup path from /proc/self/cgroup to a directory under a
// mount whose root is root; ok=false if the mount does not show that cgroup
// (a bind mount of another subtree).
func inMount(mountpoint, root, path string) (string, bool) {
	switch {
	case root == "/":
		return filepath.Join(mountpoint, path), true
	case path == root:
		return mountpoint, true
	case strings.HasPrefix(path, root+"/"):
		return filepath.Join(mountpoint, path[len(root):]), true
	}
	return "", false
}

// resolve finds sbx's own cgroup directory in each mounted hierarchy.
func resolve(pc procCgroup, mounts []cgroupMount) (*hierarchy, []hierarchy) {
	var v2 *hierarchy
	if pc.hasV2 {
		for _, m := range mounts {
			if !m.v2 {
				continue
			}
			dir, ok := inMount(m.mountpoint, m.root, pc.v2)
			if !ok {
				continue
			}
			// Prefer the canonical mount when the hierarchy is mounted twice.
			if v2 == nil || m.mountpoint == "/sys/fs/cgroup" {
				v2 = &hierarchy{mount: m.mountpoint, base: dir, own: dir}
			}
		}
		if v2 != nil && strings.HasPrefix(filepath.Base(v2.own), supervisorPrefix) {
			// sbx (this one, re-executed, or its parent sbx) already sits in a
			// supervisor leaf: the sandboxes belong next to it, not below it.
			v2.base = filepath.Dir(v2.own)
		}
	}
	var v1 []hierarchy
	seen := map[string]bool{}
	for _, m := range mounts {
		if m.v2 || seen[m.mountpoint] {
			continue
		}
		path, ok := pc.v1Path[m.controllers[0]]
		if !ok {
			continue
		}
		dir, ok := inMount(m.mountpoint, m.root, path)
		if !ok {
			continue
		}
		seen[m.mountpoint] = true
		v1 = append(v1, hierarchy{controllers: m.controllers, mount: m.mountpoint, base: dir, cgroupPath: path})
	}
	return v2, v1
}

// ownV2 is the v2 cgroup this process is in now (it changes when New
// moves sbx into its leaf, under subtreeMu).
func (l *layout) ownV2() string {
	subtreeMu.Lock()
	defer subtreeMu.Unlock()
	return l.v2.own
}

// knownControllers lists which controllers the layout offers, for Probe.
func (l *layout) knownControllers() []string {
	var out []string
	switch l.mode {
	case ModeV2:
		out = append(out, l.v2Avail...)
	case ModeV1:
		for _, h := range l.v1 {
			out = append(out, h.controllers...)
		}
	}
	slices.Sort(out)
	return out
}

// PureV2 reports whether /sys/fs/cgroup is a cgroup2 mount (a pure v2
// host), with one statfs: there the sandbox's group must exist before
// the clone, since the init is born in it (CLONE_INTO_CGROUP).
func PureV2() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}
