//go:build sbx_lean

package engine

import "github.com/sbx-sandbox/sbx/profiles"

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
// the full sbx runs it.
func useImage(prof *profiles.Profile, _ Progress) (*Image, error) {
	if prof.Image == "" {
		return nil, nil
	}
	return nil, &NeedsFullError{Image: prof.Image, Origin: prof.Origin("image")}
}
