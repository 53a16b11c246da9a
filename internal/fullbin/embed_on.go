//go:build sbx_embedfull

package fullbin

import _ "embed"

// image is the full sbx, built by `make sbx` just before the lean one
// (see the package comment); building with sbx_embedfull without it
// fails here.
//
//go:embed sbx-full.bin
var image []byte
