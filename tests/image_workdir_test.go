//go:build integration

package tests

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestImageWorkingDirIgnored: an image's WorkingDir (/app here, which the
// image has) is recorded, and `sbx image inspect` shows it, but a run does
// not use it: the payload starts in the workspace, the one writable place,
// where a relative path writes (README, Images; docs/DESIGN.md).
func TestImageWorkingDirIgnored(t *testing.T) {
	reg := startRegistry(t)
	img := buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t),
		layerTar(t, tarEnt{name: "app/", typ: tar.TypeDir, mode: 0o755}, tarEnt{name: "app/main.py", typ: tar.TypeReg, mode: 0o644, body: "print('app')\n"}))
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.WorkingDir = "/app"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := reg.push(t, "t/workdir:v1", img)
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		res := resultIn(t, r, home, "--image", ref, "-c", "import os; open('here.txt', 'w').write('x'); print(os.getcwd(), os.path.exists('main.py'))")
		if res.Status != nsjail.StatusOK || res.Stdout != "/workspace False\n" {
			t.Errorf("on an image with WorkingDir /app: status %s (%s), stdout %q, want ok and %q\nstderr: %s",
				res.Status, res.Message, res.Stdout, "/workspace False\n", res.Stderr)
		}
		if out := sbxIn(t, r, home, "image", "inspect", ref); out.code != 0 || !strings.Contains(out.stdout, `"working_dir": "/app"`) {
			t.Errorf("image inspect: exit %d, want working_dir /app shown: %s%s", out.code, out.stdout, out.stderr)
		}
	})
}
