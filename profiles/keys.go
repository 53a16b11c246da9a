package profiles

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/internal/units"
	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// kind is how a key's value is written and checked.
type kind uint8

const (
	kindString   kind = iota // free text
	kindEnum                 // one of field.enum
	kindPath                 // an absolute path, or empty where allowed
	kindSize                 // units.Size: "256M", or an integer byte count
	kindDuration             // units.Duration: "1.5s", or a number of seconds
	kindInt                  // int64 or int
	kindFloat                // float64
	kindList                 // []string; each entry in field.enum if set
	kindBool                 // true or false
)

// field is one key of the schema. The table below is the only place that
// knows how a key maps onto the Profile struct; reading TOML, flags,
// validation and `sbx profile show` all go through it, so none of them
// needs reflection (a test checks the table against the struct).
type field struct {
	key  string
	kind kind
	// ptr returns a pointer to the key's field in p: *string, *units.Size,
	// *units.Duration, *int64, *int, *float64 or *[]string.
	ptr  func(p *Profile) any
	enum []string
	// min and max bound sizes (bytes), durations (ns) and integers;
	// hasMax says whether max applies.
	min, max int64
	hasMax   bool
	// check is what the bounds cannot say; it returns a reason or "".
	check func(p *Profile) string
}

// Layers are the values "require" accepts.
var Layers = []string{"cgroup", "seccomp", "landlock", "netns", "userns"}

// The enums, with the safe choice first.
var (
	outputPolicies  = []string{OutputTruncate, OutputKill}
	networkModes    = []string{NetworkNone, NetworkAllow}
	seccompPolicies = policyname.All()
	landlockModes   = []string{LandlockOn, LandlockOff}
)

// Upper bounds that the kernel sets: pid_max can be at most 2^22
// (PID_MAX_LIMIT on 64-bit), and setrlimit(RLIMIT_NOFILE) above
// fs.nr_open (default 2^20) fails with EPERM.
const (
	maxPids   = 1 << 22
	maxNofile = 1 << 20
	maxCPUs   = 1024
	// maxSigpending bounds queued signals far above any real use: the
	// host's own default is about the number of 16 KiB pages of RAM / 8.
	maxSigpending = 1 << 22
)

// maxWallTime bounds a run's wall-clock limit: a sandbox is for one task,
// and a typo (999999h) must not hold a sandbox, its cgroup and its
// workspace for a century (issue 19, point 15).
const maxWallTime = 24 * time.Hour

// fields lists every key in the order of the struct (and of docs and
// `sbx profile show`). Env is not here: its keys are the variable names
// (see envPrefix).
var fields = []field{
	{key: "description", kind: kindString, ptr: func(p *Profile) any { return &p.Description }, check: checkDescription},
	{key: "extends", kind: kindString, ptr: func(p *Profile) any { return &p.Extends }},
	{key: "require", kind: kindList, ptr: func(p *Profile) any { return &p.Require }, enum: Layers},
	{key: "preload", kind: kindList, ptr: func(p *Profile) any { return &p.Preload }, check: checkPreload},
	{key: "capture_figures", kind: kindBool, ptr: func(p *Profile) any { return &p.CaptureFigures }},
	{key: "image", kind: kindString, ptr: func(p *Profile) any { return &p.Image }, check: checkImage},
	{key: "limits.memory", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.Memory }, min: 1 << 20},
	{key: "limits.pids", kind: kindInt, ptr: func(p *Profile) any { return &p.Limits.Pids }, min: 1, max: maxPids, hasMax: true},
	{key: "limits.cpus", kind: kindFloat, ptr: func(p *Profile) any { return &p.Limits.CPUs }, check: checkCPUs},
	{key: "limits.cpu_time", kind: kindDuration, ptr: func(p *Profile) any { return &p.Limits.CPUTime }, min: int64(time.Millisecond)},
	{key: "limits.wall_time", kind: kindDuration, ptr: func(p *Profile) any { return &p.Limits.WallTime }, min: int64(time.Millisecond), max: int64(maxWallTime), hasMax: true},
	{key: "limits.output", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.Output }, min: 1},
	{key: "limits.output_policy", kind: kindEnum, ptr: func(p *Profile) any { return &p.Limits.OutputPolicy }, enum: outputPolicies},
	// tmpfs sizes below one page are rounded up by the kernel anyway.
	{key: "limits.workspace_size", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.WorkspaceSize }, min: 4 << 10},
	{key: "limits.workspace_inodes", kind: kindInt, ptr: func(p *Profile) any { return &p.Limits.WorkspaceInodes }, min: 1},
	{key: "limits.tmp_size", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.TmpSize }, min: 4 << 10},
	{key: "limits.tmp_inodes", kind: kindInt, ptr: func(p *Profile) any { return &p.Limits.TmpInodes }, min: 1},
	{key: "limits.shm_size", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.ShmSize }, min: 4 << 10},
	{key: "limits.nofile", kind: kindInt, ptr: func(p *Profile) any { return &p.Limits.Nofile }, min: 1, max: maxNofile, hasMax: true},
	{key: "limits.fsize", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.Fsize }, min: 1},
	// 0 is allowed for both: no queued signals (kill(2) still delivers a
	// standard signal, only its siginfo is dropped), no message queues.
	{key: "limits.sigpending", kind: kindInt, ptr: func(p *Profile) any { return &p.Limits.Sigpending }, min: 0, max: maxSigpending, hasMax: true},
	{key: "limits.msgqueue", kind: kindSize, ptr: func(p *Profile) any { return &p.Limits.Msgqueue }, min: 0},
	{key: "filesystem.rootfs", kind: kindPath, ptr: func(p *Profile) any { return &p.Filesystem.Rootfs }, check: checkRootfs},
	{key: "filesystem.workspace", kind: kindPath, ptr: func(p *Profile) any { return &p.Filesystem.Workspace }, check: checkWorkspace},
	{key: "filesystem.ro_binds", kind: kindList, ptr: func(p *Profile) any { return &p.Filesystem.ROBinds }, check: checkROBinds},
	{key: "network.mode", kind: kindEnum, ptr: func(p *Profile) any { return &p.Network.Mode }, enum: networkModes},
	{key: "network.allow", kind: kindList, ptr: func(p *Profile) any { return &p.Network.Allow }, check: checkAllow},
	{key: "network.max_connections", kind: kindInt, ptr: func(p *Profile) any { return &p.Network.MaxConnections }, min: 1, max: 4096, hasMax: true},
	{key: "network.max_bytes_out", kind: kindSize, ptr: func(p *Profile) any { return &p.Network.MaxBytesOut }, min: 1},
	{key: "network.max_bytes_in", kind: kindSize, ptr: func(p *Profile) any { return &p.Network.MaxBytesIn }, min: 1},
	{key: "network.idle_timeout", kind: kindDuration, ptr: func(p *Profile) any { return &p.Network.IdleTimeout }, min: int64(time.Millisecond)},
	{key: "seccomp.policy", kind: kindEnum, ptr: func(p *Profile) any { return &p.Seccomp.Policy }, enum: seccompPolicies},
	{key: "landlock.mode", kind: kindEnum, ptr: func(p *Profile) any { return &p.Landlock.Mode }, enum: landlockModes},
	{key: "sandbox.uid", kind: kindInt, ptr: func(p *Profile) any { return &p.Sandbox.UID }, min: 0, max: 65535, hasMax: true},
	{key: "sandbox.hostname", kind: kindString, ptr: func(p *Profile) any { return &p.Sandbox.Hostname }, check: checkHostname},
}

// envPrefix starts the key of each environment variable: env.NAME.
const envPrefix = "env."

// fieldIndex finds a field by key without a map (the table is short, and
// a map would be built at init on every sbx start).
func lookupField(key string) *field {
	for i := range fields {
		if fields[i].key == key {
			return &fields[i]
		}
	}
	return nil
}

// tables are the TOML tables of the schema.
var tables = []string{"limits", "filesystem", "network", "seccomp", "landlock", "sandbox", "env"}

func isTable(key string) bool {
	for _, t := range tables {
		if t == key {
			return true
		}
	}
	return false
}

// want says what a key's value must look like, for type errors.
func (f *field) want() string {
	switch f.kind {
	case kindSize:
		return `a size ("256M", "1.5G") or a byte count`
	case kindDuration:
		return `a duration ("500ms", "1.5s", "2m") or a number of seconds`
	case kindInt:
		return "an integer"
	case kindFloat:
		return "a number"
	case kindList:
		return "a list of strings"
	case kindBool:
		return "true or false"
	case kindEnum:
		return "one of " + quoteList(f.enum)
	default:
		return "a string"
	}
}

// value returns the key's value as TOML would hold it (string, int64,
// float64, bool or []string): sizes and durations as their human strings.
func (f *field) value(p *Profile) any {
	switch v := f.ptr(p).(type) {
	case *string:
		return *v
	case *units.Size:
		return v.String()
	case *units.Duration:
		return v.String()
	case *int64:
		return *v
	case *int:
		return int64(*v)
	case *float64:
		return *v
	case *bool:
		return *v
	case *[]string:
		if *v == nil {
			return []string{}
		}
		return *v
	}
	panic("profiles: field " + f.key + " has an unhandled type")
}

// number returns the key's value as an int64 for the bounds check: bytes,
// nanoseconds or the integer itself.
func (f *field) number(p *Profile) (int64, bool) {
	switch v := f.ptr(p).(type) {
	case *units.Size:
		return int64(*v), true
	case *units.Duration:
		return int64(*v), true
	case *int64:
		return *v, true
	case *int:
		return int64(*v), true
	}
	return 0, false
}

// formatBound prints a bound in the key's unit.
func (f *field) formatBound(n int64) string {
	switch f.kind {
	case kindSize:
		return units.FormatSize(n)
	case kindDuration:
		if n >= int64(time.Hour) && n%int64(time.Hour) == 0 {
			return strconv.FormatInt(n/int64(time.Hour), 10) + "h" // 24h, not 86400s
		}
		return units.FormatDuration(time.Duration(n))
	}
	return strconv.FormatInt(n, 10)
}

// setFlag parses one flag's values into the key. Paths are made absolute
// against the working directory, the way a user means them on a command
// line; a list flag replaces the profile's list.
func (f *field) setFlag(p *Profile, vals []string) error {
	if f.kind == kindList {
		var list []string
		for _, v := range vals {
			if v = strings.TrimSpace(v); v != "" {
				if f.key == "filesystem.ro_binds" {
					// --ro-bind ./models: SRC as the user means it.
					if src, rest, hasDest := strings.Cut(v, ":"); !filepath.IsAbs(src) && src != "" {
						abs, err := filepath.Abs(src)
						if err != nil {
							return err
						}
						v = abs
						if hasDest {
							v += ":" + rest
						}
					}
				}
				list = append(list, v)
			}
		}
		*f.ptr(p).(*[]string) = list
		return nil
	}
	s := ""
	if len(vals) > 0 {
		s = vals[len(vals)-1]
	}
	switch ptr := f.ptr(p).(type) {
	case *string:
		if f.kind == kindPath && s != "" {
			abs, err := filepath.Abs(s)
			if err != nil {
				return err
			}
			s = abs
		}
		*ptr = s
	case *units.Size:
		n, err := units.ParseSize(s)
		if err != nil {
			return err
		}
		*ptr = units.Size(n)
	case *units.Duration:
		d, err := units.ParseDuration(s)
		if err != nil {
			return err
		}
		*ptr = units.Duration(d)
	case *int64, *int:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return errNotInteger(err)
		}
		return f.setInt(p, n)
	case *float64:
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return errText("not a number")
		}
		*ptr = v
	case *bool:
		v, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return errText("not true or false")
		}
		*ptr = v
	}
	return nil
}

// setInt stores n in an int64 or int field.
func (f *field) setInt(p *Profile, n int64) error {
	switch ptr := f.ptr(p).(type) {
	case *int64:
		*ptr = n
	case *int:
		if int64(int(n)) != n {
			return errText("too large")
		}
		*ptr = int(n)
	}
	return nil
}

func errNotInteger(err error) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return errText("too large")
	}
	return errText("not an integer")
}

// errText is a reason without a wrapped cause.
type errText string

func (e errText) Error() string { return string(e) }

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// flagText prints a value the way it would be given on the command line,
// for errors about values that came from a flag.
func flagText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return strings.Join(v, ",")
	}
	return ""
}
