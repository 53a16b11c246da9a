//go:build sbx_embedinit

package initbin

import _ "embed"

// image is sbx-init, built by `make sbx` just before sbx (see the
// package comment); building with sbx_embedinit without it fails here.
//
//go:embed sbx-init.bin
var image []byte
