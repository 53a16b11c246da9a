// Package profiles holds the built-in profiles (TOML files embedded in the
// binary), reads users' profile files, merges a profile with what it
// extends and with flags — remembering where every value came from — checks
// every value, and turns the result into the Spec of one sandbox.
//
// The schema below is the single source of truth: docs/profiles.md is
// generated from these types, their toml tags and their doc comments
// (go generate ./profiles), and a test fails when the two drift apart.
package profiles

//go:generate go test -run ^TestDocsInSync$ -update .

import (
	"time"

	"github.com/sbx-sandbox/sbx/internal/units"
	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// DefaultName is the profile used when none is given.
const DefaultName = "standard"

// Profile is what a run may do.
type Profile struct {
	// Name is the built-in name or the file's base name without .toml; it
	// is what the Result reports as "profile".
	Name string `toml:"-"`
	// Description says in one line who the profile is for.
	Description string `toml:"description"`
	// Extends names the profile this one starts from: a built-in name
	// ("strict"), or a file path relative to this file ("base.toml").
	// Empty means the built-in defaults.
	Extends string `toml:"extends"`
	// Require lists the layers a run must have, or it fails with exit 125
	// before the payload starts: "cgroup", "seccomp", "landlock", "netns",
	// "userns".
	Require []string `toml:"require"`
	// Preload lists the Python modules a warm sandbox (the pool of sbx
	// serve) imports before its payload arrives, e.g. ["numpy",
	// "pandas"]: dotted names, imported in order. A cold run (sbx exec)
	// imports nothing ahead.
	Preload []string `toml:"preload"`
	// CaptureFigures asks a Python run (sbx exec, POST /v1/exec) for the
	// matplotlib figures its script leaves open or plt.show()s: the
	// runner renders them (Agg) as PNGs into the Result's results, within
	// the output cap. A session's cells always return theirs.
	CaptureFigures bool `toml:"capture_figures"`
	// Image names an OCI image in sbx's store (`sbx image ls`: a name
	// such as "python:3.11-slim", or an id), or a registry reference that
	// is pulled on first use. Its unpacked tree becomes the read-only
	// root (instead of the host's /usr; not with filesystem.rootfs) and
	// its Env is applied under sbx's base environment. Its WorkingDir is
	// not used: the working directory stays the workspace. Empty means
	// none. A run on an image is handed to the full sbx the installed
	// one embeds, which reads the profile again: a profile that names
	// one (itself or through extends) must be a file, not a pipe
	// (`--profile <(...)` is refused, saying so).
	Image      string     `toml:"image"`
	Limits     Limits     `toml:"limits"`
	Filesystem Filesystem `toml:"filesystem"`
	Network    Network    `toml:"network"`
	Seccomp    Seccomp    `toml:"seccomp"`
	Landlock   Landlock   `toml:"landlock"`
	Sandbox    Sandbox    `toml:"sandbox"`
	// Env is added to the payload's environment (over sbx's base PATH,
	// HOME, LANG, TMPDIR, ...); nothing comes from the host. --env flags
	// win over it.
	Env map[string]string `toml:"env"`

	// ImageEnv is the image's Env, filled in when the image is resolved
	// (never from a file): it goes over BaseEnv and under Env.
	ImageEnv []string `toml:"-" json:"-"`

	// origins says who set each key that is not at its default; see
	// Origin. Keys of Env are "env.NAME".
	origins map[string]Origin
	// chain is the profiles that were read, the profile itself first and
	// then what it extends, for `sbx profile show`.
	chain []string
	// files is the profile files among them, in the same order, as they
	// were opened (chain's names may be quoted for display).
	files []string
}

// Limits are enforced by the mechanism the Result names (cgroup, rlimit,
// tmpfs size, or sbx's own watchdog).
type Limits struct {
	// Memory is the memory limit of the whole sandbox, without swap
	// (cgroup memory.max). Files in the workspace and /tmp are in memory
	// too and count against it.
	Memory units.Size `toml:"memory"`
	// Pids is the most processes and threads the sandbox may hold at once.
	Pids int64 `toml:"pids"`
	// CPUs is the CPU bandwidth quota, in CPUs: 0.5 is half of one CPU,
	// 2 is two CPUs' worth of time per period. A value above the CPUs the
	// host gives sbx is clamped to them, with a warning.
	CPUs float64 `toml:"cpus"`
	// CPUTime is the CPU time (user + system) of all the sandbox's
	// processes together; past it the run ends with status cpu_limit.
	CPUTime units.Duration `toml:"cpu_time"`
	// WallTime is the wall-clock limit of the payload; past it the run
	// ends with status timeout. At most 24h.
	WallTime units.Duration `toml:"wall_time"`
	// Output is how many bytes of each of stdout and stderr are kept.
	Output units.Size `toml:"output"`
	// OutputPolicy is what happens past output: "truncate" keeps the head
	// and the tail and lets the program run; "kill" ends the run with
	// status output_limit.
	OutputPolicy string `toml:"output_policy"`
	// WorkspaceSize is the size of the workspace tmpfs (the payload's
	// working directory and HOME).
	WorkspaceSize units.Size `toml:"workspace_size"`
	// WorkspaceInodes is the most files and directories the workspace may
	// hold.
	WorkspaceInodes int64 `toml:"workspace_inodes"`
	// TmpSize is the size of the /tmp tmpfs.
	TmpSize units.Size `toml:"tmp_size"`
	// TmpInodes is the most files and directories /tmp may hold.
	TmpInodes int64 `toml:"tmp_inodes"`
	// ShmSize is the size of /dev/shm (POSIX shared memory, used by
	// Python's multiprocessing).
	ShmSize units.Size `toml:"shm_size"`
	// Nofile is RLIMIT_NOFILE, the most open files per process.
	Nofile int64 `toml:"nofile"`
	// Fsize is RLIMIT_FSIZE, the largest file a process may write.
	Fsize units.Size `toml:"fsize"`
	// Sigpending is RLIMIT_SIGPENDING, the most signals queued (sigqueue,
	// POSIX timers) for the sandbox's user at once. The kernel also
	// counts them against the quota of the user who started sbx.
	Sigpending int64 `toml:"sigpending"`
	// Msgqueue is RLIMIT_MSGQUEUE, the bytes of POSIX message queues the
	// sandbox's user may hold, also counted against the quota of the
	// user who started sbx.
	Msgqueue units.Size `toml:"msgqueue"`
}

// Filesystem says what the sandbox sees.
type Filesystem struct {
	// Rootfs is an absolute path to a directory tree to use as the
	// read-only "/"; empty means the host's /usr with the /bin, /lib*,
	// /sbin beside it.
	Rootfs string `toml:"rootfs"`
	// Workspace is where the workspace tmpfs is mounted: the payload's
	// working directory and HOME, and where input files are put.
	Workspace string `toml:"workspace"`
	// ROBinds lists host paths (absolute) bound read-only, e.g. a
	// directory of models or data sets: "SRC" at the same path inside,
	// "SRC:DEST" at DEST. Not under /proc, /dev, /etc, /tmp or the
	// workspace, which the sandbox mounts itself.
	ROBinds []string `toml:"ro_binds"`
}

// The values of the profile's string enums (keys.go lists them, the safe
// choice first), so that code compares with a name, not a literal.
const (
	// limits.output_policy
	OutputTruncate = "truncate" // keep the head and the tail, let the program run
	OutputKill     = "kill"     // end the run with status output_limit
	// network.mode
	NetworkNone  = "none"  // only a loopback interface
	NetworkAllow = "allow" // egress through sbx's proxy, to network.allow only
	// landlock.mode
	LandlockOn  = "on"
	LandlockOff = "off"
)

// Network says what the sandbox may reach.
type Network struct {
	// Mode is "none" (only a loopback interface: no network at all) or
	// "allow" (egress through sbx's proxy, to the hosts in Allow only).
	Mode string `toml:"mode"`
	// Allow lists the hosts that mode "allow" lets the sandbox reach:
	// "api.example.com", "*.example.org" (whole labels), "10.0.0.7",
	// "[2001:db8::1]", each with an optional ":PORT".
	Allow []string `toml:"allow"`
	// MaxConnections is how many proxied connections may be open at once.
	MaxConnections int64 `toml:"max_connections"`
	// MaxBytesOut is the most bytes the sandbox may send, over the run.
	MaxBytesOut units.Size `toml:"max_bytes_out"`
	// MaxBytesIn is the most bytes the sandbox may receive, over the run.
	MaxBytesIn units.Size `toml:"max_bytes_in"`
	// IdleTimeout cuts a proxied connection with no traffic either way.
	IdleTimeout units.Duration `toml:"idle_timeout"`
}

// Seccomp picks the syscall filter.
type Seccomp struct {
	// Policy is "allowlist" (only the syscalls CPython and the common data
	// stack need), "denylist" (everything but the known escape and attack
	// surface), or "none" (no syscall policy: a disabled security layer;
	// only the guard that keeps the payload from its init stays).
	Policy string `toml:"policy"`
}

// Landlock is the Landlock LSM ruleset under the namespaces.
type Landlock struct {
	// Mode is "on" (the payload may write only in the workspace, /tmp,
	// /dev/shm and the device nodes, whatever the mounts allow, with the
	// kernel's Landlock ABI, if it has one: require = ["landlock"] makes
	// it a must) or "off" (no ruleset: a disabled security layer).
	Mode string `toml:"mode"`
}

// Sandbox is the identity inside.
type Sandbox struct {
	// UID is the user (and group) id the payload runs as inside its user
	// namespace; it maps to an unprivileged id on the host either way.
	UID int `toml:"uid"`
	// Hostname is the sandbox's host name (its own UTS namespace).
	Hostname string `toml:"hostname"`
}

// Defaults are the values every profile starts from. They are the values
// of the standard profile (a test keeps the two equal), so a user's file
// without "extends" is as safe as standard.
func Defaults() Profile {
	return Profile{
		Limits: Limits{
			Memory:          1 << 30,
			Pids:            256,
			CPUs:            2,
			CPUTime:         units.Duration(60 * time.Second),
			WallTime:        units.Duration(120 * time.Second),
			Output:          10 << 20,
			OutputPolicy:    OutputTruncate,
			WorkspaceSize:   512 << 20,
			WorkspaceInodes: 65536,
			TmpSize:         256 << 20,
			TmpInodes:       16384,
			ShmSize:         64 << 20,
			Nofile:          1024,
			Fsize:           512 << 20,
			Sigpending:      1024,
			Msgqueue:        64 << 10,
		},
		Filesystem: Filesystem{Workspace: "/workspace"},
		Network:    Network{Mode: NetworkNone, MaxConnections: 16, MaxBytesOut: 64 << 20, MaxBytesIn: 256 << 20, IdleTimeout: units.Duration(60 * time.Second)},
		Seccomp:    Seccomp{Policy: policyname.Denylist},
		Landlock:   Landlock{Mode: LandlockOn},
		Sandbox:    Sandbox{UID: 1000, Hostname: "sbx"},
	}
}
