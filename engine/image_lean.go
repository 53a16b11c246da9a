//go:build sbx_lean

package engine

import (
	"fmt"
	"os"

	"github.com/sbx-sandbox/sbx/profiles"
)

// The lean sbx's side of images (-tags sbx_lean, `make sbx`'s installed
// binary): it links neither package image nor go-containerregistry, whose
// package inits every `sbx exec` paid before main (issue 13;
// image_store.go is the full sbx's side). A profile that names an image
// is known as soon as the profile is loaded and the flags are laid over
// it, before any image code would run: Build then fails with a
// *NeedsFullError, and the CLI hands the command to the full sbx.

// ImageSupport says whether this build resolves images itself.
const ImageSupport = false

// useImage: nil without an image; with one, the typed error that says
// the full sbx runs it, once every profile file it read can be read
// again the same way (checkRereadable).
func useImage(prof *profiles.Profile, _ Progress) (*Image, error) {
	if prof.Image == "" {
		return nil, nil
	}
	if err := checkRereadable(prof); err != nil {
		return nil, err
	}
	return nil, &NeedsFullError{Image: prof.Image, Origin: prof.Origin("image")}
}

// checkRereadable fails when a profile file of prof's extends chain is
// not a regular file: the full sbx the run is handed to loads the profile
// again, and a pipe (`--profile <(...)`, /dev/fd/N), a FIFO or a device
// would give it what is left: nothing, and a run on the defaults,
// without the image, whose Result would name the profile. Said instead.
func checkRereadable(prof *profiles.Profile) error {
	for _, path := range prof.Files() {
		name := profiles.DisplayPath(path)
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("profile %s: %w: a run on an image is handed to the full sbx, which reads the profile again", name, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("profile %s is not a regular file (%s): a run on an image (image %q, %s) is handed to the full sbx, which must read the profile again; give it as a file", name, fileType(fi.Mode()), prof.Image, prof.Origin("image"))
		}
	}
	return nil
}

// fileType names a file's type for checkRereadable's message.
func fileType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}
