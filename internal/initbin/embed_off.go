//go:build !sbx_embedinit

package initbin

// image is empty in a plain `go build`: the supervisor re-executes
// /proc/self/exe as the init (see the package comment).
var image []byte
