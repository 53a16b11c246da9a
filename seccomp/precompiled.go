package seccomp

// Precompiled built-in filters. Compiling the allowlist with libseccomp
// takes ~20 ms of CPU (two programs of ~200 syscalls each, with argument
// checks), on the critical path of every strict run, for a result that is
// the same every time. So the built-in policies are compiled once, by
// `go generate ./seccomp` (TestPrecompiledFilters -update), into
// precompiled_gen_$GOARCH.go, and Compile serves them from there. make
// generates it before each build, with the libseccomp it links, and builds
// with -tags sbx_precompiled; it is not in git (generated, ~120 KB). A plain
// go build leaves it out (precompiled_none.go) and compiles at run time.
//
// A precompiled filter is used only for a policy whose content is exactly
// the one it was generated from: each entry carries the policy's whole key
// (appendKey), compared byte for byte, as the in-memory cache compares it.
// A policy edited without regenerating is compiled at run time, as before
// (slower, never wrong), and TestPrecompiledFilters fails until the file is
// regenerated: it compiles every built-in policy afresh with the libseccomp
// linked and requires the embedded filter to be identical.

//go:generate go test -run ^TestPrecompiledFilters$ -update .

// precompiledFilter is one generated entry: plain constants, so the table
// costs no code at package init (the init process imports this package).
type precompiledFilter struct {
	key          string
	policy       string
	bpf          string
	fallback     string
	notify       bool
	errnos       []int // pairs: syscall number, errno
	defaultErrno int
	holds        []int
}

// precompiledPolicies are the policies the generator compiles: every
// policy a run can load (ForRun).
var precompiledPolicies = []string{Allowlist, Denylist, None}

// lookupPrecompiled returns the filter generated for the policy with this
// key, or nil when there is none.
func lookupPrecompiled(key string) *Filter {
	for i := range precompiledTable {
		if e := &precompiledTable[i]; e.key == key {
			return e.filter()
		}
	}
	return nil
}

func (e *precompiledFilter) filter() *Filter {
	f := &Filter{
		Policy:       e.policy,
		BPF:          []byte(e.bpf),
		Notify:       e.notify,
		DefaultErrno: e.defaultErrno,
		Holds:        append([]int(nil), e.holds...),
	}
	if e.fallback != "" {
		f.Fallback = []byte(e.fallback)
	}
	for i := 0; i+1 < len(e.errnos); i += 2 {
		f.Errnos = mapSet(f.Errnos, e.errnos[i], e.errnos[i+1])
	}
	return f
}
