// Package profiles holds the built-in profiles (TOML files embedded in the
// binary) and turns a profile plus flags into the Spec of one sandbox.
package profiles

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/sbx-sandbox/sbx/internal/units"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/rootfs"
)

//go:embed *.toml
var builtin embed.FS

// DefaultName is the profile used when none is given.
const DefaultName = "standard"

// Profile is what a run may do. Zero values mean "as the built-in
// defaults say"; see Defaults.
type Profile struct {
	Name        string `toml:"-"`
	Description string `toml:"description"`
	// Extends names the profile (built-in or file) this one starts from.
	Extends string `toml:"extends"`
	// Require lists the layers a run must have, or it fails before the
	// payload starts: cgroup, seccomp, netns, userns.
	Require    []string          `toml:"require"`
	Limits     Limits            `toml:"limits"`
	Filesystem Filesystem        `toml:"filesystem"`
	Network    Network           `toml:"network"`
	Seccomp    Seccomp           `toml:"seccomp"`
	Sandbox    Sandbox           `toml:"sandbox"`
	Env        map[string]string `toml:"env"`
}

// Network says what the sandbox may reach.
type Network struct {
	// Mode is "none" (only lo) or "allow" (through the allowlist proxy).
	Mode string `toml:"mode"`
	// Allow lists host patterns: "api.example.com", "*.example.org:443".
	Allow []string `toml:"allow"`
}

// Seccomp picks the syscall policy.
type Seccomp struct {
	// Policy is "allowlist" (only what CPython and the data stack need),
	// "denylist" (the known escape and attack surface refused), or "none"
	// (no filter: a disabled security layer).
	Policy string `toml:"policy"`
}

// Limits are enforced by the mechanism the Result names.
type Limits struct {
	// Memory is the cgroup memory limit (memory.max, no swap).
	Memory units.Size `toml:"memory"`
	// Pids is the most tasks the sandbox may hold at once.
	Pids int64 `toml:"pids"`
	// CPUs is the CPU bandwidth quota, in CPUs (0.5 = half of one).
	CPUs float64 `toml:"cpus"`
	// CPUTime is the total CPU time of all the sandbox's processes.
	CPUTime units.Duration `toml:"cpu_time"`
	// WallTime is the wall-clock limit of the payload.
	WallTime units.Duration `toml:"wall_time"`
	// Output is how many bytes of each of stdout and stderr are kept.
	Output units.Size `toml:"output"`
	// OutputPolicy is "truncate" (keep head and tail, let the program
	// run) or "kill" (end the run with status output_limit).
	OutputPolicy    string     `toml:"output_policy"`
	WorkspaceSize   units.Size `toml:"workspace_size"`
	WorkspaceInodes int64      `toml:"workspace_inodes"`
	TmpSize         units.Size `toml:"tmp_size"`
	TmpInodes       int64      `toml:"tmp_inodes"`
	ShmSize         units.Size `toml:"shm_size"`
	// Nofile is RLIMIT_NOFILE, the most open files per process.
	Nofile int64 `toml:"nofile"`
	// Fsize is RLIMIT_FSIZE, the largest file a process may write.
	Fsize units.Size `toml:"fsize"`
}

// Filesystem says what the sandbox sees.
type Filesystem struct {
	// Rootfs is a directory tree to use as "/"; empty means the host's
	// /usr with the /bin, /lib*, /sbin beside it.
	Rootfs    string   `toml:"rootfs"`
	Workspace string   `toml:"workspace"`
	ROBinds   []string `toml:"ro_binds"`
}

// Sandbox is the identity inside.
type Sandbox struct {
	UID      int    `toml:"uid"`
	Hostname string `toml:"hostname"`
}

// Defaults are the values every profile starts from.
func Defaults() Profile {
	return Profile{
		Limits: Limits{
			WallTime:        units.Duration(120 * time.Second),
			Output:          10 << 20,
			WorkspaceSize:   512 << 20,
			WorkspaceInodes: 65536,
			TmpSize:         256 << 20,
			TmpInodes:       16384,
			ShmSize:         64 << 20,
			Nofile:          1024,
			Fsize:           512 << 20,
		},
		Filesystem: Filesystem{Workspace: "/workspace"},
		Sandbox:    Sandbox{UID: 1000, Hostname: "sbx"},
	}
}

// Names lists the built-in profiles.
func Names() []string {
	ents, _ := builtin.ReadDir(".")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".toml"))
	}
	sort.Strings(names)
	return names
}

// Load reads a built-in profile by name, or a user's file when ref
// contains a slash or ends in .toml.
func Load(ref string) (*Profile, error) {
	if ref == "" {
		ref = DefaultName
	}
	var data []byte
	var err error
	source := ref
	if strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".toml") {
		data, err = os.ReadFile(ref)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", ref, unwrapPath(err))
		}
	} else {
		data, err = builtin.ReadFile(ref + ".toml")
		if err != nil {
			return nil, fmt.Errorf("profile %q: no such built-in profile (have: %s)", ref, strings.Join(Names(), ", "))
		}
		source = "built-in " + ref
	}
	p := Defaults()
	p.Name = strings.TrimSuffix(path.Base(ref), ".toml")
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, decodeError(source, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("profile %s: %w", source, err)
	}
	return &p, nil
}

// decodeError names the file, the line and the key of a TOML error.
func decodeError(source string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var errs []error
		for _, e := range strict.Errors {
			row, _ := e.Position()
			errs = append(errs, fmt.Errorf("profile %s: line %d: unknown key %s", source, row, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			return fmt.Errorf("profile %s: line %d: %s: %s", source, row, strings.Join(k, "."), msg)
		}
		return fmt.Errorf("profile %s: line %d: %s", source, row, msg)
	}
	return fmt.Errorf("profile %s: %w", source, err)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Validate checks the ranges of every value.
func (p *Profile) Validate() error {
	var errs []error
	l := p.Limits
	positive := []struct {
		key string
		v   int64
	}{
		{"limits.output", int64(l.Output)},
		{"limits.workspace_size", int64(l.WorkspaceSize)},
		{"limits.workspace_inodes", l.WorkspaceInodes},
		{"limits.tmp_size", int64(l.TmpSize)},
		{"limits.tmp_inodes", l.TmpInodes},
		{"limits.shm_size", int64(l.ShmSize)},
		{"limits.nofile", l.Nofile},
		{"limits.fsize", int64(l.Fsize)},
	}
	for _, c := range positive {
		if c.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %d", c.key, c.v))
		}
	}
	if l.WallTime < 0 {
		errs = append(errs, fmt.Errorf("limits.wall_time: must not be negative"))
	}
	if p.Sandbox.UID < 0 || p.Sandbox.UID > 65535 {
		errs = append(errs, fmt.Errorf("sandbox.uid: %d is outside 0..65535", p.Sandbox.UID))
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("env: bad variable name %q", k))
		}
	}
	return errors.Join(errs...)
}

// BaseEnv is the environment every payload starts with; nothing comes
// from the host.
func BaseEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
		"MPLBACKEND=Agg",
	}
}

// Spec turns the profile into the Spec of one sandbox; extraEnv (KEY=VALUE,
// from flags) overrides the profile's env, which overrides BaseEnv.
func (p *Profile) Spec(id string, extraEnv []string) (nsjail.Spec, error) {
	l := p.Limits
	fs := p.Filesystem
	uid := p.Sandbox.UID
	plan, err := rootfs.Plan(rootfs.Options{
		Rootfs:          fs.Rootfs,
		Workspace:       fs.Workspace,
		WorkspaceSize:   int64(l.WorkspaceSize),
		WorkspaceInodes: l.WorkspaceInodes,
		TmpSize:         int64(l.TmpSize),
		TmpInodes:       l.TmpInodes,
		ShmSize:         int64(l.ShmSize),
		EtcFromRootfs:   rootfs.DefaultEtcFromRootfs,
		ROBinds:         fs.ROBinds,
		Identity:        rootfs.Identity{UID: uid, GID: uid, Hostname: p.Sandbox.Hostname, Home: fs.Workspace},
	})
	if err != nil {
		return nsjail.Spec{}, err
	}
	env := mergeEnv(BaseEnv(fs.Workspace), p.Env, extraEnv)
	return nsjail.Spec{
		Version:  nsjail.SpecVersion,
		ID:       id,
		Profile:  p.Name,
		Hostname: p.Sandbox.Hostname,
		UID:      uid,
		GID:      uid,
		Mounts:   plan,
		Workdir:  fs.Workspace,
		Env:      env,
		Rlimits: []nsjail.Rlimit{
			// No core dumps: one would land in the workspace, or go to a
			// host helper when core_pattern is a pipe.
			{Resource: "RLIMIT_CORE", Soft: 0, Hard: 0},
			{Resource: "RLIMIT_NOFILE", Soft: uint64(l.Nofile), Hard: uint64(l.Nofile)},
			{Resource: "RLIMIT_FSIZE", Soft: uint64(l.Fsize), Hard: uint64(l.Fsize)},
		},
	}, nil
}

// mergeEnv applies KEY=VALUE layers in order, later ones winning, keeping
// the first position of each key.
func mergeEnv(base []string, profile map[string]string, extra []string) []string {
	idx := map[string]int{}
	var out []string
	set := func(k, v string) {
		if i, ok := idx[k]; ok {
			out[i] = k + "=" + v
			return
		}
		idx[k] = len(out)
		out = append(out, k+"="+v)
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	keys := make([]string, 0, len(profile))
	for k := range profile {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, profile[k])
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	return out
}
