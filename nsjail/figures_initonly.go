//go:build sbx_init_only

package nsjail

// checkPNG in the init binary (figures_png.go is the supervisor's): it
// only ever runs Init, so this is never reached there. Should it be, it
// fails closed: no figure is taken.
func checkPNG([]byte) error { return errInitOnly }
