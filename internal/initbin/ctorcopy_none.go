//go:build !cgo || !linux || !sbx_embedinit || sbx_init_only

package initbin

// constructorCopy: a build without cgo (or without the image) runs no C
// constructor, and an `sbx exec` copies the memfd from Go (early.go).
func constructorCopy() ctorCopy { return ctorCopy{exe: -1, memfd: -1, req: -1} }

// The copy process's exit statuses (ctorcopy_cgo.go); no such process
// exists in this build.
const (
	copyErrnoMax = 249
	copyNoReq    = 250
	copyEOF      = 251
	copyOrphan   = 252
)
