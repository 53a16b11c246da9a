//go:build sbx_lean

package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/profiles"
)

// TestLeanBuildNeedsTheFullSbx (go test -tags sbx_lean ./engine): the
// lean engine's Build fails with a *NeedsFullError exactly when the
// effective profile names an image, by --image or by a profile file's
// image key, and builds every other Config as the full engine does.
func TestLeanBuildNeedsTheFullSbx(t *testing.T) {
	withImage := func(name string) ([]string, bool) {
		if name == "image" {
			return []string{"python:3.11-slim"}, true
		}
		return nil, false
	}
	file := filepath.Join(t.TempDir(), "img.toml")
	if err := os.WriteFile(file, []byte("extends = \"strict\"\nimage = \"mine\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name that profile messages quote (a control character): the
	// check that it can be read again stats the file, not its quoted
	// display name.
	quoted := filepath.Join(t.TempDir(), "img\tquoted.toml")
	if err := os.WriteFile(quoted, []byte("extends = \"strict\"\nimage = \"mine\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		req   Request
		image string
		kind  profiles.OriginKind
	}{
		{"--image", Request{Profile: "strict", Flags: withImage}, "python:3.11-slim", profiles.FromFlag},
		{"image key", Request{Profile: file}, "mine", profiles.FromFile},
		{"image key, a quoted file name", Request{Profile: quoted}, "mine", profiles.FromFile},
		{"no image", Request{Profile: "strict"}, "", ""},
		{"no image, standard", Request{Profile: "standard"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Build("id1", tc.req)
			defer cfg.Close()
			var nf *NeedsFullError
			switch {
			case tc.image == "" && err != nil:
				t.Fatalf("Build: %v, want a Config", err)
			case tc.image == "" && (cfg == nil || cfg.Image != nil):
				t.Fatalf("Build without an image: %+v", cfg)
			case tc.image != "" && !errors.As(err, &nf):
				t.Fatalf("Build on image %s: %v (%T), want a *NeedsFullError", tc.image, err, err)
			case tc.image != "" && (nf.Image != tc.image || nf.Origin.Kind != tc.kind || cfg != nil):
				t.Fatalf("Build on image %s: %+v and Config %v", tc.image, nf, cfg)
			}
		})
	}
}

// TestLeanBuildRefusesAPipedImageProfile: a profile on an image read from
// a pipe (`--profile <(...)`) cannot be handed off, since the full sbx
// would read the pipe again and find it empty (a run on the defaults,
// without the image): Build says so instead of a *NeedsFullError. Without
// an image, the pipe is read once and runs here.
func TestLeanBuildRefusesAPipedImageProfile(t *testing.T) {
	piped := func(text string) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		w.WriteString(text)
		w.Close()
		return fmt.Sprintf("/proc/self/fd/%d", r.Fd())
	}
	cfg, err := Build("id1", Request{Profile: piped("extends = \"strict\"\nimage = \"mine\"\n")})
	var nf *NeedsFullError
	if cfg != nil || err == nil || errors.As(err, &nf) || !strings.Contains(err.Error(), "is not a regular file (a pipe)") {
		t.Fatalf("Build of a piped profile on an image: %v, %v; want the error that says it cannot be handed off", cfg, err)
	}
	cfg, err = Build("id1", Request{Profile: piped("extends = \"strict\"\n")})
	if err != nil || cfg.Image != nil {
		t.Fatalf("Build of a piped profile without an image: %v, %+v", err, cfg)
	}
	cfg.Close()
}
