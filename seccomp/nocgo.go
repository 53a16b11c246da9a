//go:build !cgo

package seccomp

// Compile and SyscallName link libseccomp through cgo, and the sbx binary
// links it statically (see the Makefile). Without cgo the package cannot
// build; this line says so instead of an "undefined: Compile" elsewhere.
var _ = thisPackageNeedsCgo_BuildWithCGO_ENABLED_1_AndLibseccompDev
