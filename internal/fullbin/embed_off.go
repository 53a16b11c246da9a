//go:build !sbx_embedfull

package fullbin

// image is empty outside the lean sbx of `make sbx`: a plain `go build`
// is the full sbx itself and hands nothing off.
var image []byte
