// Package engine is the shared core of `sbx exec`, `sbx doctor` and `sbx
// serve`: a profile and its overrides become one plain Config (Build), and
// a Config and a payload become one Result (Run), the egress proxy's
// attempts and the audit line included. The CLI and the server are thin
// over it: flags or a request body in, a Result out (issue 12, item 4).
package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/doctor"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/seccomp"
)

// Request is what a caller asks of a profile, before anything is checked.
type Request struct {
	// Profile is a built-in name or a profile file's path ("" is the
	// default profile).
	Profile string
	// Flags are trusted overrides, the CLI's --memory, --net...: a flag's
	// values (a list flag's split at commas) and whether it was given. A
	// flag may raise a limit; the user who runs sbx owns the host.
	Flags func(name string) ([]string, bool)
	// Lower are an untrusted caller's limits (sbx serve's "limits"), by
	// key without "limits." ("memory": "256M"): each may only lower the
	// profile's, after Flags.
	Lower map[string]string
	// Resolve are --resolve pins, NAME:PORT:ADDR; only with the network on.
	Resolve []string
	// ResolveFlag names Resolve in errors ("--resolve").
	ResolveFlag string
	// PullProgress is told how a pull of the profile's image on first use
	// goes (sbx exec's progress bar); nil pulls quietly.
	PullProgress Progress
}

// Config is the effective configuration of one run, built once by Build:
// plain data, JSON-serialisable, and all that exec, doctor and serve need
// to run it.
type Config struct {
	// ID is the run's id, the Result's and the Spec's.
	ID string `json:"id"`
	// Profile is the effective profile, with where each value came from.
	Profile *profiles.Profile `json:"profile"`
	// Spec is the sandbox's, as the init gets it.
	Spec nsjail.Spec `json:"spec"`
	// Host are the limits sbx enforces from the host side.
	Host HostLimits `json:"host"`
	// Proxy is the egress proxy's settings; nil when the network is off.
	Proxy *ProxyConfig `json:"proxy,omitempty"`
	// Require are the layers a run must have (the profile's require).
	Require []string `json:"require"`
	// Warnings are what Build lowered or found, for the Result.
	Warnings []string `json:"warnings,omitempty"`
	// Image is the OCI image the root comes from (the profile's image);
	// nil on the host's /usr or a rootfs directory. It holds the store's
	// lock on the image until Close.
	Image *Image `json:"image,omitempty"`
}

// HostLimits are the limits the supervisor and the cgroup enforce.
type HostLimits struct {
	// Wall is the payload's wall-clock limit.
	Wall time.Duration `json:"wall_ns"`
	// Output is how many bytes of each of stdout and stderr are kept.
	Output int64 `json:"output_bytes"`
	// Cgroup are the cgroup's values (rlimits without one).
	Cgroup nsjail.Limits `json:"cgroup"`
}

// ProxyConfig is the plain-data part of netproxy.Config a profile sets.
type ProxyConfig struct {
	Allow []string `json:"allow"`
	// Resolve pins NAME:PORT to ADDR, like curl --resolve.
	Resolve      map[string]string `json:"resolve,omitempty"`
	MaxConns     int               `json:"max_conns"`
	MaxBytesUp   int64             `json:"max_bytes_up"`
	MaxBytesDown int64             `json:"max_bytes_down"`
	IdleTimeout  time.Duration     `json:"idle_timeout_ns"`
}

// Build turns a request into the Config of run id: the profile loaded,
// the flags laid over it, the requested limits lowered, the CPUs clamped
// to the host, the required layers checked, the Spec planned and the
// proxy's pins parsed. It is the one place that does so: `sbx exec`,
// `sbx doctor` and `sbx serve` all call it. The error names the flag, key
// or layer at fault; the Config is nil then. In the lean sbx, a profile
// that names an image fails with a *NeedsFullError (image_lean.go).
func Build(id string, req Request) (*Config, error) {
	ref := req.Profile
	if ref == "" {
		ref = profiles.DefaultName
	}
	prof, err := profiles.Load(ref)
	if err != nil {
		return nil, err
	}
	if req.Flags != nil {
		if err := prof.ApplyFlags(req.Flags); err != nil {
			return nil, err
		}
	}
	if len(req.Lower) > 0 {
		if err := prof.Lower(req.Lower); err != nil {
			return nil, err
		}
	}
	return fromProfile(id, prof, req.Resolve, req.ResolveFlag, req.PullProgress)
}

// FromProfile is Build for a profile already loaded and overridden (the
// self-test changes a built-in's network before it runs; doctor --image
// sets its image). An image not stored is pulled quietly.
func FromProfile(id string, prof *profiles.Profile, resolve []string, resolveFlag string) (*Config, error) {
	return fromProfile(id, prof, resolve, resolveFlag, nil)
}

// fromProfile is FromProfile, telling progress how a pull goes. A Config
// it returns must be Closed (it may hold an image's lock); on an error it
// holds nothing.
func fromProfile(id string, prof *profiles.Profile, resolve []string, resolveFlag string, progress Progress) (cfg *Config, err error) {
	warnings := ClampToHost(prof)
	if err := CheckRequired(prof); err != nil {
		return nil, err
	}
	// The image is resolved before the Spec is planned: its tree becomes
	// the profile's rootfs, its Env the profile's ImageEnv.
	img, err := useImage(prof, progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && img != nil {
			img.lock.Close()
		}
	}()
	spec, err := prof.Spec(id, nil)
	if err != nil {
		return nil, err
	}
	cfg = &Config{
		ID:      id,
		Profile: prof,
		Spec:    spec,
		Host: HostLimits{
			Wall:   time.Duration(prof.Limits.WallTime),
			Output: int64(prof.Limits.Output),
			Cgroup: CgroupLimits(prof),
		},
		Require:  append([]string{}, prof.Require...),
		Warnings: warnings,
		Image:    img,
	}
	if resolveFlag == "" {
		resolveFlag = "resolve"
	}
	if prof.Network.Mode == profiles.NetworkAllow {
		pins, err := parsePins(resolve, resolveFlag)
		if err != nil {
			return nil, err
		}
		n := prof.Network
		cfg.Proxy = &ProxyConfig{
			Allow:        n.Allow,
			Resolve:      pins,
			MaxConns:     int(n.MaxConnections),
			MaxBytesUp:   int64(n.MaxBytesOut),
			MaxBytesDown: int64(n.MaxBytesIn),
			IdleTimeout:  time.Duration(n.IdleTimeout),
		}
	} else if len(resolve) > 0 {
		return nil, fmt.Errorf("%s: the network is off (network.mode \"none\"); use --net allow --allow-host NAME", resolveFlag)
	}
	return cfg, nil
}

// parsePins reads NAME:PORT:ADDR pins into netproxy's Resolve map.
func parsePins(resolves []string, flag string) (map[string]string, error) {
	pins := map[string]string{}
	for _, r := range resolves {
		i := strings.Index(r, ":")
		j := strings.Index(r[i+1:], ":") + i + 1
		if i <= 0 || j <= i+1 || j == len(r)-1 {
			return nil, fmt.Errorf("%s %q: want NAME:PORT:ADDR, e.g. api.example.com:443:127.0.0.1", flag, r)
		}
		pins[r[:j]] = r[j+1:]
	}
	return pins, nil
}

// CgroupLimits is the part of a profile that nsjail.Limits carries.
func CgroupLimits(p *profiles.Profile) nsjail.Limits {
	return nsjail.Limits{
		MemoryBytes:   int64(p.Limits.Memory),
		Pids:          p.Limits.Pids,
		CPUs:          p.Limits.CPUs,
		CPUTime:       time.Duration(p.Limits.CPUTime),
		OutputKill:    p.Limits.OutputPolicy == profiles.OutputKill,
		RequireCgroup: requires(p, "cgroup"),
	}
}

func requires(p *profiles.Profile, layer string) bool {
	for _, r := range p.Require {
		if r == layer {
			return true
		}
	}
	return false
}

// CheckRequired fails a run before anything starts when a required layer
// cannot be had: the policy turns it off, or the host lacks it. The
// cgroup is checked when it is created (nsjail.Limits.RequireCgroup).
func CheckRequired(p *profiles.Profile) error {
	for _, layer := range p.Require {
		switch layer {
		case "seccomp":
			if p.Seccomp.Policy == seccomp.None {
				return fmt.Errorf("the profile requires seccomp, but seccomp.policy is \"none\" (%s): set it to allowlist or denylist", p.Origin("seccomp.policy"))
			}
			if c := doctor.SeccompUserNotif(); c.Status == doctor.Fail {
				return fmt.Errorf("the profile requires seccomp: %s (fix: %s)", c.Detail, c.Fix)
			}
		case "landlock":
			if p.Landlock.Mode != "on" {
				return fmt.Errorf("the profile requires landlock, but landlock.mode is %q (%s): set it to \"on\"", p.Landlock.Mode, p.Origin("landlock.mode"))
			}
			if c := doctor.Landlock(nsjail.LandlockABI()); c.Status != doctor.OK {
				return fmt.Errorf("the profile requires landlock: %s (fix: %s)", c.Detail, c.Fix)
			}
		case "userns", "netns":
			// sbx always runs in its own user and network namespaces:
			// without them there is no sandbox at all, and the run fails
			// before the payload starts, naming the cause.
		}
	}
	return nil
}

// ClampToHost lowers the values the host cannot give and says so: a CPU
// quota above the CPUs sbx may run on (sched_getaffinity(2), which
// runtime.NumCPU reads) limits nothing, and reads as if the run had them
// (issue 19, point 15). A built-in profile's value is clamped silently:
// standard's 2 CPUs on a 1-CPU host is no one's mistake.
func ClampToHost(p *profiles.Profile) []string {
	var warnings []string
	if host := float64(runtime.NumCPU()); p.Limits.CPUs > host {
		o := p.Origin("limits.cpus")
		if o.Kind == profiles.FromFlag || o.Kind == profiles.FromFile {
			what := "limits.cpus " + strconv.FormatFloat(p.Limits.CPUs, 'g', -1, 64) + " (" + o.String() + ")"
			if o.Kind == profiles.FromFlag {
				what = o.Name + " " + strconv.Quote(o.Text)
			}
			warnings = append(warnings, fmt.Sprintf("%s: this host gives sbx %g CPUs; clamped to %g", what, host, host))
		}
		p.Limits.CPUs = host
	}
	return warnings
}

// ProfileSHA256 hashes the effective profile, for the audit line: the
// SHA-256 of its JSON encoding (encoding/json, the exported fields). It is
// computed when asked, not by Build: only a run with an audit log needs it,
// and the encoding's first use costs encoding/json's reflection over every
// profile type, ~0.2 ms of every run's CPU otherwise (issue 13). The
// profile is not changed after Build, so the value is the same.
func (c *Config) ProfileSHA256() string {
	pj, _ := json.Marshal(c.Profile)
	return sha256Hex(pj)
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
