package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// testImage is an image of the given layers, with an Env.
func testImage(t testing.TB, layers ...[]byte) v1.Image {
	img := empty.Image
	for _, l := range layers {
		b := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Env = []string{"PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8"}
	cfg.Config.Cmd = []string{"/bin/probe"}
	cfg.OS, cfg.Architecture = "linux", Platform().Architecture
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func newStore(t *testing.T) *Store {
	s, err := Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveTree(s.Home) })
	return s
}

func dirNames(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func TestStoreAddOnceAndName(t *testing.T) {
	s := newStore(t)
	img := testImage(t, tarOf(t, file("bin/probe", "#!"), dir("etc/")), tarOf(t, file("bin/.wh.probe", ""), file("bin/x", "x")))
	m, err := s.Add(img, AddOptions{Names: []string{"a"}, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(img, AddOptions{Names: []string{"b"}, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(s.Home, "images")); len(got) != 1 {
		t.Fatalf("images/ = %v, want one tree", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root(m.ID), "bin/x")); err != nil || string(b) != "x" {
		t.Fatalf("bin/x = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(m.ID), "bin/probe")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the whiteout left bin/probe: %v", err)
	}
	d, _ := img.Digest()
	if m.Digest != d.String() || !strings.HasPrefix(m.ID, "sha256:") || len(m.Env) != 2 {
		t.Fatalf("meta = %+v", m)
	}
	got, err := s.Inspect("b")
	if err != nil || strings.Join(got.Names, ",") != "a,b" {
		t.Fatalf("Inspect = %+v, %v", got, err)
	}
	if id, _ := s.Lookup(hexOf(m.ID)[:12]); id != m.ID {
		t.Fatalf("Lookup by id prefix = %q", id)
	}
	// rm of one name keeps the tree for the other; rm of the last goes.
	if _, gone, err := s.Remove("a"); err != nil || gone {
		t.Fatalf("Remove a: gone %v, %v", gone, err)
	}
	if _, gone, err := s.Remove("b"); err != nil || !gone {
		t.Fatalf("Remove b: gone %v, %v", gone, err)
	}
	if got := dirNames(t, filepath.Join(s.Home, "images")); len(got) != 0 {
		t.Fatalf("images/ after rm = %v", got)
	}
	if _, err := s.Lookup("b"); err == nil {
		t.Fatal("b still found")
	}
}

func TestStoreLayerCap(t *testing.T) {
	s := newStore(t)
	s.Limits.MaxLayers = 2
	img := testImage(t, tarOf(t, file("a", "1")), tarOf(t, file("b", "2")), tarOf(t, file("c", "3")))
	if _, err := s.Add(img, AddOptions{Names: []string{"x"}, Source: "test"}); err == nil || !strings.Contains(err.Error(), "3 layers, more than 2") {
		t.Fatalf("err = %v, want the layer cap", err)
	}
}

func TestStoreParallelAddsOneCopy(t *testing.T) {
	s := newStore(t)
	img := testImage(t, tarOf(t, file("bin/probe", strings.Repeat("x", 1<<16))))
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate Store values: as separate sbx processes, they
			// only share the files and their locks.
			s2 := &Store{Home: s.Home, Limits: s.Limits}
			_, errs[i] = s2.Add(img, AddOptions{Names: []string{"p"}, Source: "test"})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := dirNames(t, filepath.Join(s.Home, "images")); len(got) != 1 {
		t.Fatalf("images/ = %v, want one copy", got)
	}
	if got := dirNames(t, filepath.Join(s.Home, "tmp")); len(got) != 0 {
		t.Fatalf("tmp/ = %v, want empty", got)
	}
}

// TestStoreDigestMismatchRefuses: the config names another diff_id than
// the layer's content has.
func TestStoreDigestMismatchRefuses(t *testing.T) {
	s := newStore(t)
	img := testImage(t, tarOf(t, file("bin/probe", "x")))
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
	bad, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Add(bad, AddOptions{Names: []string{"bad"}, Source: "test"})
	if err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Fatalf("err = %v, want a digest mismatch", err)
	}
	if got := dirNames(t, filepath.Join(s.Home, "images")); len(got) != 0 {
		t.Fatalf("images/ = %v after a refused image", got)
	}
	if got := dirNames(t, filepath.Join(s.Home, "tmp")); len(got) != 0 {
		t.Fatalf("tmp/ = %v after a refused image", got)
	}
	if _, err := s.Lookup("bad"); err == nil {
		t.Fatal("a refused image got a name")
	}
}

// TestStoreInterruptedThenRetried: a pull that dies half-way (here, a
// leftover tmp/ entry as a killed sbx leaves it) is invisible, and the
// next pull of the image removes it and completes.
func TestStoreInterruptedThenRetried(t *testing.T) {
	s := newStore(t)
	img := testImage(t, tarOf(t, file("bin/probe", "x")))
	m0, err := s.Add(img, AddOptions{Names: []string{"x"}, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, gone, err := s.Remove("x"); err != nil || !gone {
		t.Fatal(gone, err)
	}
	stale := filepath.Join(s.Home, "tmp", hexOf(m0.ID)+".killed")
	if err := os.MkdirAll(filepath.Join(stale, "rootfs/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "rootfs/bin/probe"), []byte("half"), 0o644)
	if _, err := s.Lookup("x"); err == nil {
		t.Fatal("a half-made image is visible")
	}
	if _, err := s.Add(img, AddOptions{Names: []string{"x"}, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(s.Home, "tmp")); len(got) != 0 {
		t.Fatalf("tmp/ = %v after the retry", got)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root(m0.ID), "bin/probe")); string(b) != "x" {
		t.Fatalf("bin/probe = %q", b)
	}
}

func TestStorePrune(t *testing.T) {
	s := newStore(t)
	a := testImage(t, tarOf(t, file("a", "a")))
	b := testImage(t, tarOf(t, file("b", "b")))
	ma, _ := s.Add(a, AddOptions{Names: []string{"a"}, Source: "test"})
	mb, err := s.Add(b, AddOptions{Names: []string{"b"}, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// A run holds b; dropping its name leaves the tree to prune.
	_, held, err := s.Use("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, gone, _ := s.Remove("b"); gone {
		t.Fatal("rm removed an image a run holds")
	}
	if got, _ := s.Prune(); len(got) != 0 {
		t.Fatalf("prune removed %v while a run holds it", got)
	}
	held.Close()
	got, err := s.Prune()
	if err != nil || len(got) != 1 || got[0] != mb.ID {
		t.Fatalf("prune = %v, %v; want %s", got, err, mb.ID)
	}
	if _, err := os.Stat(s.Root(ma.ID)); err != nil {
		t.Fatalf("prune removed a named image: %v", err)
	}
}

func TestStoreImportFormats(t *testing.T) {
	img := testImage(t, tarOf(t, file("bin/probe", "p")))
	tmp := t.TempDir()
	tag, _ := name.NewTag("example.org/t/probe:v1")
	docker := filepath.Join(tmp, "docker.tar")
	if err := tarball.WriteToFile(docker, tag, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(tmp, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "example.org/t/oci:v2"})); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(tmp, "oci.tar")
	tarDir(t, lay, archive)
	for _, tc := range []struct{ file, as, want string }{
		{docker, "", "example.org/t/probe:v1"},
		{lay, "", "example.org/t/oci:v2"},
		{archive, "mine", "index.docker.io/library/mine:latest"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			s := newStore(t)
			m, err := s.Import(tc.file, tc.as)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Names) != 1 || m.Names[0] != tc.want {
				t.Fatalf("names %v, want %s", m.Names, tc.want)
			}
			if b, _ := os.ReadFile(filepath.Join(s.Root(m.ID), "bin/probe")); string(b) != "p" {
				t.Fatalf("bin/probe = %q", b)
			}
			if got := dirNames(t, filepath.Join(s.Home, "tmp")); len(got) != 0 {
				t.Fatalf("tmp/ = %v after import", got)
			}
		})
	}
	s := newStore(t)
	junk := filepath.Join(tmp, "junk.tar")
	os.WriteFile(junk, tarOf(t, file("x", "y")), 0o644)
	if _, err := s.Import(junk, ""); err == nil || !strings.Contains(err.Error(), "neither a docker save tarball") {
		t.Fatalf("junk: %v", err)
	}
}

// tarDir writes dir's files as a tarball (an OCI archive of a layout).
func tarDir(t *testing.T, dir, out string) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		tw.WriteHeader(h)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
		return nil
	})
	tw.Close()
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStorePruneLeavesAnImportInProgress: an OCI archive's temporary
// layout is locked while an import reads it; prune removes it only after.
func TestStorePruneLeavesAnImportInProgress(t *testing.T) {
	s := newStore(t)
	dir := filepath.Join(s.Home, "tmp", importPrefix+"busy")
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := lockDir(dir, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Prune(); len(got) != 0 {
		t.Fatalf("prune removed %v during an import", got)
	}
	l.Close()
	if got, _ := s.Prune(); len(got) != 1 {
		t.Fatalf("prune removed %v after the import, want its layout", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("layout still there: %v", err)
	}
}
