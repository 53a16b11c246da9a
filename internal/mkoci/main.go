// Command mkoci wraps a root filesystem tarball (mmdebstrap's
// --format=tar output) into a one-layer OCI archive that `sbx image
// import` reads: the last step of `make image-data`.
//
//	go run ./internal/mkoci -name sbx-data:bookworm -env LANG=C.UTF-8 rootfs.tar out.oci.tar
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, ",") }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }

func main() {
	name := flag.String("name", "", "the image's name, recorded as org.opencontainers.image.ref.name (required)")
	cmd := flag.String("cmd", "python3", "the image's Cmd (one word)")
	var env envFlag
	flag.Var(&env, "env", "KEY=VALUE for the image's Env (repeatable)")
	flag.Parse()
	if *name == "" || flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkoci -name NAME [-env KEY=VALUE]... [-cmd CMD] ROOTFS.tar OUT.tar")
		os.Exit(2)
	}
	if err := build(flag.Arg(0), flag.Arg(1), *name, env, []string{*cmd}); err != nil {
		fmt.Fprintln(os.Stderr, "mkoci:", err)
		os.Exit(1)
	}
}

// build writes out, an OCI archive (a tar of an OCI layout) of one image
// whose single layer is the rootfs tarball.
func build(rootfs, out, name string, env, cmd []string) error {
	layer, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return fmt.Errorf("layer %s: %w", rootfs, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Env, cfg.Config.Cmd = env, cmd
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".mkoci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	plat := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": name}), layout.WithPlatform(plat)); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	return tarDir(dir, out)
}

// tarDir writes the files below dir as the tarball out.
func tarDir(dir, out string) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".tmp")
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(out+".tmp", out)
}
