package nsjail

import (
	"fmt"
	"strings"

	"github.com/sbx-sandbox/sbx/nsjail/spec"
)

// The warm start's contract types live in nsjail/spec with the others.
type (
	Warm  = spec.Warm
	Lower = spec.Lower
)

// MaxPreload bounds the preload list (each is an argv entry).
const MaxPreload = spec.MaxPreload

// CheckModuleName accepts a dotted Python module name (spec.CheckModuleName).
func CheckModuleName(m string) error { return spec.CheckModuleName(m) }

// lowerRlimits returns base with each of lower applied where it is lower
// (soft and hard each); never raises.
func lowerRlimits(base, lower []Rlimit) []Rlimit {
	out := append([]Rlimit{}, base...)
	for _, r := range lower {
		if cur := rlimitFor(out, r.Resource); cur != nil {
			cur.Hard = min(cur.Hard, r.Hard)
			cur.Soft = min(cur.Soft, r.Soft, cur.Hard)
			continue
		}
		out = append(out, r)
	}
	return out
}

// warmArgv reports whether a payload runs in the waiting interpreter: its
// argv[0] resolves to the interpreter's program, and argv[1] is a script
// or -c CODE (an interpreter option would change how the interpreter
// starts, which it already has), and its environment additions set none
// of warmStartEnv (read by the interpreter or the preload at their start,
// too late now).
func warmArgv(argv []string, env []string) bool {
	if len(argv) < 2 || argv[1] == "" {
		return false
	}
	if strings.HasPrefix(argv[1], "-") && (argv[1] != "-c" || len(argv) < 3) {
		return false
	}
	for _, kv := range env {
		for _, p := range warmStartEnv {
			if strings.HasPrefix(kv, p) {
				return false
			}
		}
	}
	return true
}

// warmStartEnv are the prefixes of variables read once at the start: by
// CPython (PYTHON*, the locale that picks its stdio encoding, TZ at the
// time module's import, HOME for site's user directory) and by the usual
// preloads (matplotlib's config, the BLAS thread pools numpy sizes at
// import).
var warmStartEnv = []string{"PYTHON", "LC_", "LANG", "TZ=", "HOME=", "MPL", "OMP_", "OPENBLAS_", "MKL_"}

// warmHandoff is what the init sends the waiting interpreter: argc, then
// argv and the environment, NUL-separated (neither may contain a NUL).
func warmHandoff(argv, env []string) []byte {
	fields := append(append([]string{fmt.Sprint(len(argv))}, argv...), env...)
	return []byte(strings.Join(fields, "\x00"))
}
