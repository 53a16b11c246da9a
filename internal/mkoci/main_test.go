package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbx-sandbox/sbx/image"
)

// TestBuildImports: a rootfs tarball as mmdebstrap writes it (device
// nodes in /dev included) becomes an OCI archive that the store imports
// under its name, with its Env and Cmd.
func TestBuildImports(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	f, _ := os.Create(rootfs)
	tw := tar.NewWriter(f)
	for _, h := range []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/bin/python3", Typeflag: tar.TypeReg, Mode: 0o755, Size: 2},
		{Name: "./bin", Typeflag: tar.TypeSymlink, Linkname: "usr/bin"},
		{Name: "./dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3},
	} {
		tw.WriteHeader(h)
		if h.Size > 0 {
			tw.Write([]byte("#!"))
		}
	}
	tw.Close()
	f.Close()
	out := filepath.Join(dir, "img.oci.tar")
	if err := build(rootfs, out, "sbx-data:test", []string{"LANG=C.UTF-8"}, []string{"python3"}); err != nil {
		t.Fatal(err)
	}
	s, err := image.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer image.RemoveTree(s.Home)
	m, err := s.Import(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Names) != 1 || m.Names[0] != "index.docker.io/library/sbx-data:test" || len(m.Env) != 1 || m.Cmd[0] != "python3" {
		t.Fatalf("meta %+v", m)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root(m.ID), "bin/python3")); err != nil || string(b) != "#!" {
		t.Fatalf("bin/python3: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(s.Root(m.ID), "dev/null")); !os.IsNotExist(err) {
		t.Fatalf("dev/null was made: %v", err)
	}
}
