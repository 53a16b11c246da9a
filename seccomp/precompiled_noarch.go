//go:build !amd64

package seccomp

// No filters are generated for this architecture: Compile compiles the
// built-in policies at run time (precompiled.go).
var precompiledTable []precompiledFilter
