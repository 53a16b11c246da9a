package profiles

import (
	"sort"
	"strings"

	"github.com/sbx-sandbox/sbx/nsjail/spec"
	"github.com/sbx-sandbox/sbx/rootfs"
)

// BaseEnv is the environment every payload starts with; nothing comes
// from the host. Caches go to /tmp, not to HOME (the workspace), so that
// the files a run reports and copies out are the ones its code wrote:
// matplotlib's font cache and config (MPLCONFIGDIR) and anything that
// follows the XDG base directory spec.
func BaseEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
		"MPLBACKEND=Agg",
		"MPLCONFIGDIR=/tmp/.config/matplotlib",
		"XDG_CACHE_HOME=/tmp/.cache",
	}
}

// Spec turns the profile into the Spec of one sandbox; extraEnv (KEY=VALUE,
// from flags) overrides the profile's env, which overrides BaseEnv.
func (p *Profile) Spec(id string, extraEnv []string) (spec.Spec, error) {
	l := p.Limits
	fs := p.Filesystem
	uid := p.Sandbox.UID
	var ns string
	if p.Network.Mode == NetworkAllow {
		ns = spec.DNSStubIP
	}
	plan, err := rootfs.Plan(rootfs.Options{
		Nameserver:      ns,
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
		return spec.Spec{}, err
	}
	env := mergeEnv(BaseEnv(fs.Workspace), nil, imageEnv(p.ImageEnv))
	env = mergeEnv(env, p.Env, extraEnv)
	return spec.Spec{
		Version:   spec.SpecVersion,
		ID:        id,
		Profile:   p.Name,
		Hostname:  p.Sandbox.Hostname,
		UID:       uid,
		GID:       uid,
		Mounts:    plan,
		ProcMasks: rootfs.ProcMasks(),
		Workdir:   fs.Workspace,
		Env:       env,
		Seccomp:   p.Seccomp.Policy,
		Landlock:  p.Landlock.Mode == LandlockOn,
		Rlimits: []spec.Rlimit{
			// No core dumps. 1, not 0: a core file needs at least a page,
			// so 1 writes none into the workspace, and when core_pattern
			// is a pipe the kernel ignores RLIMIT_CORE except for the
			// value 1, which aborts the dump (core(5), fs/coredump.c);
			// with 0 a host helper would get the crash. The init guard
			// keeps the payload from changing it (seccomp.initGuard).
			{Resource: "RLIMIT_CORE", Soft: 1, Hard: 1},
			{Resource: "RLIMIT_NOFILE", Soft: uint64(l.Nofile), Hard: uint64(l.Nofile)},
			{Resource: "RLIMIT_FSIZE", Soft: uint64(l.Fsize), Hard: uint64(l.Fsize)},
			// Per user namespace since Linux 5.14 and charged to every
			// namespace above, so to the quota of the user who started
			// sbx too (kernel/ucount.c): bounded here, a sandbox cannot
			// drain it.
			{Resource: "RLIMIT_SIGPENDING", Soft: uint64(l.Sigpending), Hard: uint64(l.Sigpending)},
			{Resource: "RLIMIT_MSGQUEUE", Soft: uint64(l.Msgqueue), Hard: uint64(l.Msgqueue)},
			// No real-time policy and no nice value below 0 for the
			// payload, whatever its caller's limits allow: sched(7)
			// lets an unprivileged process take SCHED_FIFO/RR up to its
			// RLIMIT_RTPRIO and lower its nice value down to 20 minus
			// its RLIMIT_NICE, and a real-time payload escapes the CPU
			// limits (nsjail.resetSchedOnFork). 0 allows neither;
			// raising them back needs CAP_SYS_RESOURCE (setrlimit(2)).
			{Resource: "RLIMIT_NICE", Soft: 0, Hard: 0},
			{Resource: "RLIMIT_RTPRIO", Soft: 0, Hard: 0},
		},
	}, nil
}

// Warm is what a warm sandbox of this profile starts ahead of its payload
// (spec.Spec.Warm): python3, with the profile's preload imported.
func (p *Profile) Warm() *spec.Warm {
	return &spec.Warm{Interpreter: "python3", Preload: append([]string(nil), p.Preload...)}
}

// imageOwned are the variables an image's Env may not set: the sandbox's
// HOME is its workspace and its TMPDIR is /tmp, whatever the image was
// built with, and the proxy variables are sbx's egress proxy's when the
// network is allowed (an image built behind a corporate proxy names one
// the sandbox cannot reach; nsjail's withProxyEnv keeps what the profile
// set, so the image's must not get that far).
var imageOwned = map[string]bool{
	"HOME": true, "TMPDIR": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
}

// imageEnv is the image's Env without the variables sbx owns, and without
// entries that are not KEY=VALUE.
func imageEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && k != "" && !imageOwned[k] {
			out = append(out, kv)
		}
	}
	return out
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
