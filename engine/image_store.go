//go:build !sbx_lean

package engine

// The image store's side of the engine: pulling, probing and resolving
// the profile's image, with package image and go-containerregistry. The
// lean sbx (-tags sbx_lean) leaves this file out, and with it every
// package init of go-containerregistry, go-digest, klauspost/compress,
// image-spec and docker's config, which each `sbx exec` paid before
// main (issue 13); image_lean.go is its side ("The inverse layout",
// docs/DESIGN.md).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/image"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// ImageSupport says whether this build resolves images itself: the
// full sbx does; the lean one returns a *NeedsFullError instead.
const ImageSupport = true

// OpenStore opens sbx's image store at its default home (image.DefaultHome).
func OpenStore() (*image.Store, error) {
	home, err := image.DefaultHome()
	if err != nil {
		return nil, err
	}
	return image.Open(home)
}

// Pull fetches ref into s, reporting to p (nil: quiet), then probes its
// python3 (ProbePython). ctx cancels it; what was half-unpacked stays in
// the store's tmp/, invisible, until the next pull or prune.
func Pull(ctx context.Context, s *image.Store, ref string, p image.Progress) (*image.Meta, error) {
	m, err := s.Pull(ctx, ref, p)
	if err == nil {
		ProbePython(s, m)
	}
	return m, err
}

// pythonProbe prints the interpreter's real path and version.
const pythonProbe = "import os, sys; print(os.path.realpath(sys.executable)); print(sys.version.split()[0])"

// ProbePython runs python3 once in a sandbox on a newly stored image (the
// default profile: the image's code is as untrusted as any payload) and
// records what it found, for the Results of the runs on it. An image
// without python3, or a host where no sandbox can be built, records
// nothing; the image is stored either way.
func ProbePython(s *image.Store, m *image.Meta) {
	if m.Python != nil {
		return
	}
	prof, err := profiles.Load(profiles.DefaultName)
	if err != nil {
		return
	}
	// The tree is set as the rootfs directly, with no prof.Image: this
	// Config holds no lock (the caller just stored the image) and pulls
	// nothing.
	prof.Filesystem.Rootfs, prof.ImageEnv = s.Root(m.ID), m.Env
	cfg, err := FromProfile(newProbeID(), prof, nil, "")
	if err != nil {
		return
	}
	defer cfg.Close()
	cfg.Host.Wall, cfg.Host.Output = 30*time.Second, 64<<10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := nsjail.Run(ctx, cfg.Job(nsjail.Payload{Argv: []string{"python3", "-c", pythonProbe}}, Options{}))
	path, ver, ok := strings.Cut(strings.TrimSpace(res.Stdout), "\n")
	if res.Status != nsjail.StatusOK || !ok || !strings.HasPrefix(path, "/") || len(res.Stdout) > 4096 {
		return
	}
	py := &image.Interpreter{Path: path, Version: strings.TrimSpace(ver)}
	if s.SetPython(m.ID, py) == nil {
		m.Python = py
	}
}

// newProbeID is a run id for the probe's sandbox, of the form sbx exec's
// are: 24 random hex digits.
func newProbeID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DataImage is the name `make image-data` imports its image as.
const DataImage = "sbx-data"

// Pullable says whether a name the store does not hold is pulled on
// first use: a reference with an explicit tag or digest
// ("python:3.11-slim", "ghcr.io/o/r@sha256:..."). A bare name ("mine",
// "sbx-data") is a local one that was never imported: pulling
// docker.io/library/mine instead would run someone else's image.
func Pullable(ref string) bool {
	if _, err := image.Normalize(ref); err != nil {
		return false
	}
	last := ref[strings.LastIndexByte(ref, '/')+1:]
	return strings.ContainsAny(last, ":@")
}

// checkSearchable: as root, the sandbox's host uid is an unprivileged
// one, and the init opens the tree's top-level entries as that uid, so
// every directory above them must be searchable by others (a store made
// with mktemp -d is 0700). Said here, naming the directory, rather than
// as the init's EACCES.
func checkSearchable(root string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for d := root; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("image store: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("image store: %s is mode %#o, not searchable by the sandbox's (unprivileged) host uid: chmod o+x %s, or set SBX_HOME to a directory that is", d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}

// useImage resolves the profile's image, pulling a tagged reference the
// store does not hold (reporting to progress; nil is quiet), and makes
// its tree the profile's rootfs and its Env the profile's ImageEnv. The
// Image holds the store's shared lock on it until the Config's Close. nil
// when the profile has no image.
func useImage(prof *profiles.Profile, progress Progress) (*Image, error) {
	if prof.Image == "" {
		return nil, nil
	}
	s, err := OpenStore()
	if err != nil {
		return nil, err
	}
	m, lock, err := s.Use(prof.Image)
	var nf *image.NotFoundError
	if errors.As(err, &nf) {
		if !Pullable(prof.Image) {
			if prof.Image == DataImage {
				err = fmt.Errorf("%w; 'make image-data' builds it", err)
			}
			return nil, err
		}
		if _, perr := Pull(context.Background(), s, prof.Image, progress); perr != nil {
			return nil, fmt.Errorf("%w, and pulling it failed: %v", err, perr)
		}
		m, lock, err = s.Use(prof.Image)
	}
	if err != nil {
		return nil, err
	}
	if err := checkSearchable(s.Root(m.ID)); err != nil {
		lock.Close()
		return nil, err
	}
	prof.Filesystem.Rootfs = s.Root(m.ID)
	prof.ImageEnv = m.Env
	return &Image{
		Info:   &nsjail.ImageInfo{Name: prof.Image, ID: m.ID, Digest: m.Digest},
		Argv:   append(append([]string{}, m.Entrypoint...), m.Cmd...),
		Python: (*nsjail.Interpreter)(m.Python),
		lock:   lock,
	}, nil
}
