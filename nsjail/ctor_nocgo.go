//go:build !cgo || sbx_init_only || !linux

package nsjail

// ConstructorNS is 0: a build without cgo runs no C constructor (see
// ctor_cgo_linux.go).
func ConstructorNS() int64 { return 0 }
