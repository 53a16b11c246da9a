package profiles

import (
	"strconv"
	"strings"
	"sync"
)

// Flag is a command-line flag that sets one profile key. The CLI builds
// its flags from Flags and hands their values to ApplyFlags, so a new
// flag is one line here.
type Flag struct {
	// Name is the flag without dashes.
	Name string
	// Key is the profile key it sets.
	Key string
	// Usage is the help text; the word in backquotes is the value's
	// placeholder in --help (urfave/cli's convention).
	Usage string
	// Category groups the flag in --help.
	Category string
}

// The --help groups of the flags.
const (
	CategoryLimits  = "Limits (default: the profile's)"
	CategoryNetwork = "Network and filesystem (default: the profile's)"
)

// Flags are the flags that override profile keys, in --help order.
var Flags = []Flag{
	{"timeout", "limits.wall_time", "wall-clock limit: `DURATION` such as 500ms, 1.5s or 2m, or a number of seconds", CategoryLimits},
	{"cpu-time", "limits.cpu_time", "CPU time of all the sandbox's processes together: `DURATION` such as 5s", CategoryLimits},
	{"memory", "limits.memory", "memory limit, no swap: `SIZE` such as 256M or 1.5G (K, M, G, T are powers of 1024), or bytes", CategoryLimits},
	{"pids", "limits.pids", "most processes and threads at once: `N`", CategoryLimits},
	{"cpus", "limits.cpus", "CPU quota in CPUs: `N` such as 0.5 or 2", CategoryLimits},
	{"output-limit", "limits.output", "bytes of each of stdout and stderr to keep: `SIZE` such as 1M", CategoryLimits},
	{"output-policy", "limits.output_policy", "what happens past --output-limit: `POLICY` truncate (keep head and tail, run on) or kill (end the run)", CategoryLimits},
	{"workspace-size", "limits.workspace_size", "size of the workspace (a tmpfs, counted as memory): `SIZE`", CategoryLimits},
	{"workspace-inodes", "limits.workspace_inodes", "most files and directories in the workspace: `N`", CategoryLimits},
	{"tmp-size", "limits.tmp_size", "size of /tmp (a tmpfs, counted as memory): `SIZE`", CategoryLimits},
	{"tmp-inodes", "limits.tmp_inodes", "most files and directories in /tmp: `N`", CategoryLimits},
	{"nofile", "limits.nofile", "most open files per process: `N`", CategoryLimits},
	{"fsize", "limits.fsize", "largest file a process may write: `SIZE`", CategoryLimits},
	{"sigpending", "limits.sigpending", "most signals queued for the sandbox's user at once: `N`", CategoryLimits},
	{"msgqueue", "limits.msgqueue", "bytes of POSIX message queues the sandbox's user may hold: `SIZE`", CategoryLimits},
	{"ro-bind", "filesystem.ro_binds", "bind host path `SRC[:DEST]` read-only at DEST (default: the same path); comma list, repeatable; replaces the profile's list", CategoryNetwork},
	{"image", "image", "run on OCI image `NAME|REF` as the read-only root: a name or id from 'sbx image ls', or a registry reference pulled on first use", CategoryNetwork},
	{"rootfs", "filesystem.rootfs", "use directory `DIR` as the read-only root instead of the host's /usr", CategoryNetwork},
	{"net", "network.mode", "`MODE`: none (loopback only) or allow (only the --allow-host hosts)", CategoryNetwork},
	{"allow-host", "network.allow", "a `HOST[:PORT]` the sandbox may reach (*.example.com: any name below); comma list, repeatable; replaces the profile's list and implies --net allow", CategoryNetwork},
	{"require", "require", "fail with exit 125 unless these layers are enforced: `LAYER,...` of " + strings.Join(Layers, ", "), CategoryNetwork},
}

// IsList tells whether the flag takes a comma list and may be repeated.
func (f Flag) IsList() bool { return lookupField(f.Key).kind == kindList }

// DefaultText describes the flag's default for --help: the profile key,
// and its value in the default profile.
func (f Flag) DefaultText() string {
	if t, ok := defaultTexts()[f.Key]; ok {
		return t
	}
	return defaultText(f.Key, Defaults())
}

// defaultTexts are the DefaultText of every flag, computed once: every
// sbx exec builds the flags of two commands (exec, profile show), and
// each text asked for the whole Defaults() afresh (issue 13).
var defaultTexts = sync.OnceValue(func() map[string]string {
	d := Defaults()
	m := make(map[string]string, len(Flags))
	for _, f := range Flags {
		m[f.Key] = defaultText(f.Key, d)
	}
	return m
})

func defaultText(key string, d Profile) string {
	text := flagText(lookupField(key).value(&d))
	switch {
	case key == "filesystem.rootfs" && text == "":
		text = "the host's /usr"
	case text == "":
		text = "none"
	}
	return "profile's " + key + "; " + DefaultName + ": " + text
}

// ApplyFlags lays the flags that were given over the profile; value
// returns a flag's values (a list flag's already split at commas) and
// whether it was given. Each key set becomes "flag --NAME" in Origin.
// --allow-host without --net also sets network.mode = "allow": a user
// naming a host means to reach it. The result is validated, so errors
// name the flag: --memory "12Q": not a size (...).
func (p *Profile) ApplyFlags(value func(name string) ([]string, bool)) error {
	var errs Errors
	for _, fl := range Flags {
		vals, ok := value(fl.Name)
		if !ok {
			continue
		}
		o := Origin{Kind: FromFlag, Name: "--" + fl.Name, Text: strings.Join(vals, ",")}
		if err := lookupField(fl.Key).setFlag(p, vals); err != nil {
			errs = append(errs, newError(o, "%s %s: %v", o.Name, strconv.Quote(strings.Join(vals, ",")), err))
			continue
		}
		p.setOrigin(fl.Key, o)
	}
	if len(errs) > 0 {
		return errs
	}
	if _, netGiven := value("net"); !netGiven && p.Network.Mode != NetworkAllow && len(p.Network.Allow) > 0 && p.Origin("network.allow").Kind == FromFlag {
		p.Network.Mode = NetworkAllow
		p.setOrigin("network.mode", Origin{Kind: FromFlag, Name: "--allow-host"})
	}
	return p.Validate()
}
