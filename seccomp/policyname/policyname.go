// Package policyname holds the names of sbx's built-in seccomp policies as
// plain data. It has no imports, so that what only names a policy (the
// Spec's validation, the profile parser's enum) builds without cgo: the
// seccomp package itself links libseccomp. seccomp.Builtin accepts
// exactly these names (seccomp's TestBuiltinsValidate).
package policyname

const (
	// Allowlist denies every syscall it does not list.
	Allowlist = "allowlist"
	// Denylist allows every syscall it does not list.
	Denylist = "denylist"
	// None loads no policy of the profile's; the init guard still runs.
	None = "none"
	// Guard is not a policy one can name but the filter a run under None
	// loads: the init guard alone (seccomp.ForRun). The init checks the
	// filter it is sent against it.
	Guard = "guard"
)

// All lists the built-in policy names, in the order messages give them.
func All() []string { return []string{Allowlist, Denylist, None} }
