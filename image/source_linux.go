package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Platform is the one sbx runs images of: this host's.
func Platform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// Normalize is the name a reference is stored under: fully qualified,
// "python:3.11" as "index.docker.io/library/python:3.11".
func Normalize(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	return r.Name(), nil
}

func normalized(ref string) string {
	n, err := Normalize(ref)
	if err != nil {
		return ref
	}
	return n
}

// Pull fetches ref from its registry (credentials from the docker config
// and its credential helpers, as docker and crane find them), for this
// host's platform, and adds it to the store under its normalised name.
func (s *Store) Pull(ctx context.Context, ref string, p Progress) (*Meta, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image pull %q: %w", ref, err)
	}
	plat := Platform()
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithPlatform(plat))
	if err != nil {
		return nil, fmt.Errorf("image pull %s: %w", r.Name(), err)
	}
	return s.Add(img, AddOptions{Names: []string{r.Name()}, Source: r.Name(), Platform: plat.String(), Remote: true, Progress: p})
}

// Import adds an image from a file: a `docker save` tarball, an OCI
// archive (a tar of an OCI layout), or an OCI layout directory. The name
// is given, or the archive's own (docker's RepoTags, the OCI
// org.opencontainers.image.ref.name annotation), or the file's base name.
func (s *Store) Import(file, as string) (*Meta, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("image import: %w", err)
	}
	var img v1.Image
	var found string
	if fi.IsDir() {
		img, found, err = fromLayout(file)
	} else {
		img, found, err = s.fromArchive(file)
	}
	if err != nil {
		return nil, fmt.Errorf("image import %s: %w", file, err)
	}
	defer Release(img)
	if as == "" {
		as = found
	}
	if as == "" {
		as = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".tar"), ".oci")
	}
	as = normalized(as)
	return s.Add(img, AddOptions{Names: []string{as}, Source: file})
}

// fromArchive reads a tarball: docker save's when it has manifest.json
// (docker 25 writes an OCI layout beside it too), else an OCI archive.
func (s *Store) fromArchive(file string) (v1.Image, string, error) {
	members, err := tarMembers(file, s.Limits.MaxEntries)
	if err != nil {
		return nil, "", err
	}
	for _, n := range []string{"manifest.json", "index.json"} {
		if members[n] > MaxMetaBytes {
			return nil, "", fmt.Errorf("%s of %d bytes, more than %d", n, members[n], MaxMetaBytes)
		}
	}
	if _, ok := members["manifest.json"]; ok {
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
		if err != nil {
			return nil, "", fmt.Errorf("manifest.json: %w", err)
		}
		if len(m) != 1 {
			return nil, "", fmt.Errorf("manifest.json: %d images; sbx imports one (docker save one image)", len(m))
		}
		if n := members[m[0].Config]; n > MaxMetaBytes {
			return nil, "", fmt.Errorf("manifest.json: config %s of %d bytes, more than %d", m[0].Config, n, MaxMetaBytes)
		}
		var tag *name.Tag
		found := ""
		if len(m[0].RepoTags) > 0 {
			if t, err := name.NewTag(m[0].RepoTags[0]); err == nil {
				tag, found = &t, t.Name()
			}
		}
		img, err := tarball.ImageFromPath(file, tag)
		if err != nil {
			return nil, "", fmt.Errorf("docker save tarball: %w", err)
		}
		return img, found, nil
	}
	_, hasIndex := members["index.json"]
	_, hasLayout := members["oci-layout"]
	if !hasIndex || !hasLayout {
		return nil, "", errors.New("neither a docker save tarball (no manifest.json) nor an OCI archive (no oci-layout and index.json)")
	}
	// An OCI archive is unpacked (by the safe extractor: it is hostile
	// input too) into the store's tmp/, read as a layout, and removed.
	dir, err := os.MkdirTemp(filepath.Join(s.Home, "tmp"), importPrefix)
	if err != nil {
		return nil, "", err
	}
	// Held until Release: prune leaves a layout that is being read.
	lock, err := lockDir(dir, unix.LOCK_EX)
	if err != nil {
		os.Remove(dir)
		return nil, "", err
	}
	ok := false
	defer func() {
		if !ok {
			RemoveTree(dir)
			lock.Close()
		}
	}()
	f, err := os.Open(file)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	x, err := NewExtractor(dir, s.Limits)
	if err != nil {
		return nil, "", err
	}
	err = x.Apply(f)
	x.Close()
	if err != nil {
		return nil, "", fmt.Errorf("OCI archive: %w", err)
	}
	img, found, err := fromLayout(dir)
	if err != nil {
		return nil, "", err
	}
	ok = true
	return &cleanupImage{Image: img, dir: dir, lock: lock}, found, nil
}

// importPrefix starts the name of an OCI archive's temporary layout in
// the store's tmp/.
const importPrefix = "import."

// lockDir takes flock(how) on the directory itself.
func lockDir(dir string, how int) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", dir, err)
	}
	return f, nil
}

// cleanupImage is an image read from a temporary layout; the store's
// prune removes the directory if sbx dies before Add returns, and
// Release does otherwise.
type cleanupImage struct {
	v1.Image
	dir  string
	lock *os.File
}

// Release removes the temporary layout of an imported OCI archive.
func Release(img v1.Image) {
	if c, ok := img.(*cleanupImage); ok {
		RemoveTree(c.dir)
		c.lock.Close()
	}
}

// tarMembers lists the entries of a tarball with their sizes, reading at
// most max headers.
func tarMembers(file string, max int) (map[string]int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	out := map[string]int64{}
	for i := 0; i < max; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		out[strings.TrimPrefix(h.Name, "./")] = h.Size
	}
	return nil, fmt.Errorf("more than %d entries", max)
}

// refNameAnnotation is the OCI image-spec's annotation for a tag.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// fromLayout picks the image for this platform from an OCI layout.
func fromLayout(dir string) (v1.Image, string, error) {
	if err := checkSize(filepath.Join(dir, "index.json"), MaxMetaBytes); err != nil {
		return nil, "", err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout: %w", err)
	}
	sized := func(d v1.Hash) error {
		return checkSize(filepath.Join(dir, "blobs", d.Algorithm, d.Hex), MaxMetaBytes)
	}
	ix, err := p.ImageIndex()
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout index.json: %w", err)
	}
	img, found, err := pickImage(ix, Platform(), 0, sized)
	if err != nil {
		return nil, "", err
	}
	// The manifest was bounded by pickImage; the config is read whole.
	if d, err := img.ConfigName(); err != nil {
		return nil, "", fmt.Errorf("OCI layout: config: %w", err)
	} else if err := sized(d); err != nil {
		return nil, "", err
	}
	return img, found, nil
}

// checkSize refuses a file of more than max bytes (layout blobs are read
// whole by go-containerregistry).
func checkSize(path string, max int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if fi.Size() > max {
		return fmt.Errorf("OCI layout: %s of %d bytes, more than %d", path, fi.Size(), max)
	}
	return nil
}

// pickImage takes the first image of ix for plat; sized bounds each
// manifest before it is read.
func pickImage(ix v1.ImageIndex, plat v1.Platform, depth int, sized func(v1.Hash) error) (v1.Image, string, error) {
	if depth > 4 {
		return nil, "", errors.New("index.json: indexes nested more than 4 deep")
	}
	im, err := ix.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("index: %w", err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && !d.Platform.Satisfies(plat) {
			continue
		}
		found := d.Annotations[refNameAnnotation]
		if !isNameLike(found) {
			found = ""
		}
		if d.MediaType.IsImage() || d.MediaType.IsIndex() {
			if err := sized(d.Digest); err != nil {
				return nil, "", err
			}
		}
		switch {
		case d.MediaType.IsImage():
			img, err := ix.Image(d.Digest)
			if err != nil {
				return nil, "", fmt.Errorf("manifest %s: %w", d.Digest, err)
			}
			return img, found, nil
		case d.MediaType.IsIndex():
			child, err := ix.ImageIndex(d.Digest)
			if err != nil {
				return nil, "", fmt.Errorf("index %s: %w", d.Digest, err)
			}
			img, f2, err := pickImage(child, plat, depth+1, sized)
			if f2 == "" {
				f2 = found
			}
			return img, f2, err
		}
	}
	return nil, "", fmt.Errorf("index: no image for %s", plat)
}

// isNameLike says whether an annotation is a name: docker writes
// "name:tag", other tools only the tag, which is no name.
func isNameLike(s string) bool {
	if _, err := name.NewTag(s); err != nil {
		return false
	}
	return strings.Contains(s[strings.LastIndexByte(s, '/')+1:], ":")
}

// decompress reads a compressed layer as it came: gzip, zstd or plain
// tar, by its magic number (the media type is not always right).
func decompress(r io.Reader, c io.Closer) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readCloser{z, c}, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// A hostile frame may ask for a huge window: bounded.
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(512<<20), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return readCloser{z.IOReadCloser(), c}, nil
	}
	return readCloser{io.NopCloser(br), c}, nil
}

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error {
	if c, ok := r.Reader.(io.Closer); ok {
		c.Close()
	}
	return r.c.Close()
}
