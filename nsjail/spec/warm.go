package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Warm asks the init to start the payload's interpreter ahead of its
// payload (the warm pool of `sbx serve`, issue 14): after confinement the
// init forks Interpreter as the payload's own process (the payload's
// filter, rlimits and cgroup), which imports Preload and then waits on a
// socket for the payload's argv and environment; the sandbox says ready
// once it waits. A payload of the form [Interpreter, SCRIPT|-c CODE, ARGS...]
// then runs in it as __main__, as a cold `python3 SCRIPT` would; any other
// payload runs cold in the same sandbox (the interpreter is killed first).
type Warm struct {
	// Interpreter is argv[0] of the payloads it serves ("python3"),
	// looked up in the Spec's PATH.
	Interpreter string `json:"interpreter"`
	// Preload are the modules imported before the sandbox says ready.
	Preload []string `json:"preload,omitempty"`
}

// MaxPreload bounds the preload list (each is an argv entry).
const MaxPreload = 64

func checkWarm(w *Warm) error {
	if w == nil {
		return nil
	}
	var errs []error
	if w.Interpreter == "" || strings.ContainsRune(w.Interpreter, 0) {
		errs = append(errs, fmt.Errorf("warm interpreter %q: want a program name or path", w.Interpreter))
	}
	if len(w.Preload) > MaxPreload {
		errs = append(errs, fmt.Errorf("warm preload: %d modules, at most %d", len(w.Preload), MaxPreload))
	}
	for _, m := range w.Preload {
		if err := CheckModuleName(m); err != nil {
			errs = append(errs, fmt.Errorf("warm preload: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CheckModuleName accepts a dotted Python module name: identifiers of
// ASCII letters, digits and underscores, not starting with a digit.
func CheckModuleName(m string) error {
	if m == "" || len(m) > 200 {
		return fmt.Errorf("module %q: want a dotted name of 1-200 characters", m)
	}
	for _, part := range strings.Split(m, ".") {
		ok := part != "" && !(part[0] >= '0' && part[0] <= '9')
		for _, c := range part {
			ok = ok && (c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		}
		if !ok {
			return fmt.Errorf("module %q: %q is not an identifier (want names like numpy or matplotlib.pyplot)", m, part)
		}
	}
	return nil
}

// Lower are limits one payload lowers below its sandbox's, applied when it
// is claimed (Exec): never raised, a value above the sandbox's is kept at
// the sandbox's. The Result's limits report the effective values.
type Lower struct {
	// Timeout lowers the wall-clock limit (Job.Timeout).
	Timeout time.Duration `json:"-"`
	// CPUTime lowers the total CPU time limit (Limits.CPUTime).
	CPUTime time.Duration `json:"-"`
	// MemoryBytes and Pids lower the cgroup's limits, which the
	// supervisor writes before the payload is sent; without a cgroup
	// they stay the sandbox's (what enforced them, rlimits set at its
	// start, is per process and already on the interpreter).
	MemoryBytes int64 `json:"-"`
	Pids        int64 `json:"-"`
	// Rlimits lower the payload's rlimits; the init sets them on the
	// waiting interpreter, or on a cold payload at its hold, with
	// prlimit(2). Any resource of CheckRlimits but RLIMIT_CORE and
	// RLIMIT_CPU (which CPUTime sets); soft and hard are each lowered.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
}

// checkLower refuses a Lower the init would not apply as asked.
func checkLower(l *Lower) error {
	if l == nil {
		return nil
	}
	var errs []error
	if l.Timeout < 0 || l.CPUTime < 0 || l.MemoryBytes < 0 || l.Pids < 0 {
		errs = append(errs, fmt.Errorf("lower: timeout %v, cpu time %v, memory %d, pids %d: want positive values (or 0: unchanged)", l.Timeout, l.CPUTime, l.MemoryBytes, l.Pids))
	}
	for _, r := range l.Rlimits {
		if r.Resource == "RLIMIT_CORE" || r.Resource == "RLIMIT_CPU" {
			errs = append(errs, fmt.Errorf("lower: %s is the sandbox's own (lower cpu time instead)", r.Resource))
		}
	}
	return errors.Join(append(errs, CheckRlimits(l.Rlimits))...)
}
