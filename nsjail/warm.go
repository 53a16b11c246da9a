package nsjail

import (
	"fmt"
	"path/filepath"
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

// MaxFigureBytes and maxFigures bound the figures of one run
// (Payload.FigureBytes).
const (
	MaxFigureBytes = spec.MaxFigureBytes
	maxFigures     = spec.MaxFigures
)

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

// warmHandoff is what the init sends the waiting interpreter: the
// report's address, the figures' byte budget (Payload.FigureBytes, 0: none
// captured), argc, then argv and the environment, NUL-separated (none may
// contain a NUL).
func warmHandoff(report string, figureBytes int64, argv, env []string) []byte {
	fields := append(append([]string{report, fmt.Sprint(max(0, figureBytes)), fmt.Sprint(len(argv))}, argv...), env...)
	return []byte(strings.Join(fields, "\x00"))
}

// pythonArgv reports whether argv runs a Python script or -c CODE with
// no interpreter option before it, the payloads the Python runner starts
// as the interpreter would (warm_driver.py) and whose uncaught exception
// it reports (Result.Error).
func pythonArgv(argv []string) bool {
	if len(argv) < 2 || !isPythonProgram(filepath.Base(argv[0])) || argv[1] == "" {
		return false
	}
	return !strings.HasPrefix(argv[1], "-") || (argv[1] == "-c" && len(argv) >= 3)
}

// isPythonProgram says whether name is a CPython 3 interpreter's:
// python3, or python3.N. Not a regexp: a package-level one is compiled at
// every start of sbx and of every init (TestOwnPackageInitsAreLight).
func isPythonProgram(name string) bool {
	rest, ok := strings.CutPrefix(name, "python3")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	minor, ok := strings.CutPrefix(rest, ".")
	if !ok || minor == "" {
		return false
	}
	for _, c := range minor {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// maxRunnerArgv bounds the argv of a payload that starts through the
// Python runner: its argv crosses twice (the handoff, and the runner's
// own command line, for ps), so a larger one, near execve's ARG_MAX
// (execve(2)), is started directly, without its error report.
const maxRunnerArgv = 256 << 10

func argvBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a) + 1
	}
	return n
}
