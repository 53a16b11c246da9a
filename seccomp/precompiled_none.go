//go:build !sbx_precompiled

package seccomp

// Built without the sbx_precompiled tag (a plain go build or go test), or
// for a GOARCH without a generated table: no filter is embedded, and Compile
// compiles the built-in policies at run time (precompiled.go). make
// generates precompiled_gen_$GOARCH.go and builds with the tag.
var precompiledTable []precompiledFilter
