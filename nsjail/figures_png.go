//go:build !sbx_init_only

package nsjail

import (
	"bytes"
	"image/png"
)

// checkPNG is the supervisor's check of a figure: a PNG's signature and
// IHDR, as png.DecodeConfig reads them. Only the supervisor checks
// figures (takeFigures); the init binary (-tags sbx_init_only) leaves
// this file out, because importing image/png registers its decoder
// (image.RegisterFormat in its package init) and so links it, with
// compress/flate, compress/zlib and hash/crc32: ~140 KB of the image each
// sandbox copies into a memfd (issue 13).
func checkPNG(b []byte) error {
	_, err := png.DecodeConfig(bytes.NewReader(b))
	return err
}
