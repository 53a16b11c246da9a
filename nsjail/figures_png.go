//go:build !sbx_init_only

package nsjail

import (
	"bytes"
	"image/png"
)

// checkPNG says whether b starts as a PNG does: its signature and IHDR,
// as png.DecodeConfig reads them (takeFigures). In a file of its own so
// that the init binary, which never runs a supervisor, links neither
// image/png nor the compress/flate and hash/crc32 it brings, nor runs
// their package inits (supervisor_initonly.go; issue 13).
func checkPNG(b []byte) error {
	_, err := png.DecodeConfig(bytes.NewReader(b))
	return err
}
