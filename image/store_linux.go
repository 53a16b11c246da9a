package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Store is the content-addressed store of unpacked images:
//
//	HOME/index.json            names -> image id (sha256 of the config)
//	HOME/lock                  flock: index.json's readers and writers
//	HOME/images/ID/meta.json   what `sbx image inspect` prints
//	HOME/images/ID/rootfs/     the read-only tree
//	HOME/locks/ID.lock         flock: exclusive to unpack or remove ID,
//	                           shared while a run uses it
//	HOME/tmp/                  unpacks in progress, renamed into images/
//	                           when complete (an interrupted pull leaves
//	                           only a tmp/ entry, removed by the next pull
//	                           of the same image or by prune)
//
// The id is the config's digest: the config names every layer's
// uncompressed digest (rootfs.diff_ids), so one id is one tree, however
// the image arrived (registry, docker save, OCI layout).
type Store struct {
	Home   string
	Limits Limits
}

// DefaultHome is where the store lives: SBX_HOME if set, /var/lib/sbx as
// root, $XDG_DATA_HOME/sbx (or ~/.local/share/sbx) otherwise.
func DefaultHome() (string, error) {
	if h := os.Getenv("SBX_HOME"); h != "" {
		return filepath.Abs(h)
	}
	if os.Geteuid() == 0 {
		return "/var/lib/sbx", nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "sbx"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" || home == "/nonexistent" {
		return "", fmt.Errorf("image store: no home directory (HOME=%q): set SBX_HOME or XDG_DATA_HOME", home)
	}
	return filepath.Join(home, ".local", "share", "sbx"), nil
}

// Open returns the store at home, making its directories.
func Open(home string) (*Store, error) {
	for _, d := range []string{home, filepath.Join(home, "images"), filepath.Join(home, "locks"), filepath.Join(home, "tmp")} {
		// 0755: the sandbox's init binds the tree from here, after
		// entering its user namespace, where a root-owned 0700 store
		// would not be searchable.
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("image store: mkdir %s: %w", d, err)
		}
	}
	return &Store{Home: home, Limits: DefaultLimits}, nil
}

// MaxMetaBytes bounds what sbx reads whole from an image: index.json,
// manifest.json, a manifest, the config (real ones are a few KiB).
const MaxMetaBytes = 16 << 20

// Meta is what the store keeps about one image.
type Meta struct {
	ID         string    `json:"id"`
	Digest     string    `json:"digest"`
	Source     string    `json:"source"`
	Platform   string    `json:"platform,omitempty"`
	Created    time.Time `json:"created,omitempty"`
	Unpacked   time.Time `json:"unpacked"`
	Env        []string  `json:"env,omitempty"`
	Entrypoint []string  `json:"entrypoint,omitempty"`
	Cmd        []string  `json:"cmd,omitempty"`
	WorkingDir string    `json:"working_dir,omitempty"` // as recorded; a run's working directory is the workspace (docs/DESIGN.md, Images)
	User       string    `json:"user,omitempty"`        // as recorded; a run's uid is the sandbox's
	Layers     []string  `json:"layers"`
	Stats      Stats     `json:"stats"`
	// Python is the image's python3 as a sandbox on it found it (once,
	// when the image was stored); nil when it has none.
	Python *Interpreter `json:"python,omitempty"`
	// Names is filled in by List and Inspect from the index.
	Names []string `json:"names,omitempty"`
}

// Interpreter is a python3: its path resolved inside the sandbox's root
// and what `python3 --version` says, without "Python ".
type Interpreter struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// SetPython records the image's interpreter in its meta.json (replaced
// whole: a reader sees the old or the new).
func (s *Store) SetPython(id string, py *Interpreter) error {
	m, err := s.meta(id)
	if err != nil {
		return err
	}
	m.Python, m.Names = py, nil
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.Home, "images", hexOf(id), "meta.json"), append(b, '\n'))
}

// Root is the unpacked tree of image id.
func (s *Store) Root(id string) string { return filepath.Join(s.Home, "images", hexOf(id), "rootfs") }

func hexOf(id string) string { return strings.TrimPrefix(id, "sha256:") }

// lockFile takes flock(how) on path, made if missing. how is LOCK_SH or
// LOCK_EX, with LOCK_NB to fail with EWOULDBLOCK instead of waiting.
func lockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if how&unix.LOCK_SH != 0 && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EROFS)) {
		// A store another user made (root's /var/lib/sbx, or a read-only
		// one): its lock files exist and are not ours to write, but
		// flock(2) takes a shared lock on a read-only fd as well, so a
		// run can hold its image against that user's rm and prune.
		f, err = os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

func (s *Store) imageLock(id string, how int) (*os.File, error) {
	return lockFile(filepath.Join(s.Home, "locks", hexOf(id)+".lock"), how)
}

// index is index.json: name -> id.
type index struct {
	Names map[string]string `json:"names"`
}

// withIndex runs fn on the index under the store's lock (exclusive if
// write), and saves it when fn changed it and write is set.
func (s *Store) withIndex(write bool, fn func(ix *index) error) error {
	how := unix.LOCK_SH
	if write {
		how = unix.LOCK_EX
	}
	l, err := lockFile(filepath.Join(s.Home, "lock"), how)
	if err != nil {
		return err
	}
	defer l.Close()
	path := filepath.Join(s.Home, "index.json")
	ix := &index{Names: map[string]string{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("image store: read %s: %w", path, err)
	default:
		if err := json.Unmarshal(b, ix); err != nil {
			return fmt.Errorf("image store: %s: %w", path, err)
		}
		if ix.Names == nil {
			ix.Names = map[string]string{}
		}
	}
	if err := fn(ix); err != nil || !write {
		return err
	}
	b, err = json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes path through a temporary file, fsync and rename:
// a reader sees the old content or the new, never a part.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("image store: create %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("image store: write %s: %w", path, err)
	}
	return nil
}

// Progress hears about the bytes of a pull, for a progress bar.
type Progress interface {
	// Update says done of total bytes (compressed, as transferred).
	Update(done, total int64)
}

// AddOptions say where an image came from and what to call it.
type AddOptions struct {
	Names    []string
	Source   string
	Platform string
	// Remote says the layers come over the network: read compressed, as
	// transferred, so that Progress counts what crosses.
	Remote   bool
	Progress Progress
}

// Add unpacks img (once per id: a second Add of the same image only adds
// its names) and names it.
func (s *Store) Add(img v1.Image, o AddOptions) (*Meta, error) {
	man, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: read manifest: %w", o.Source, err)
	}
	// The config is read whole: its declared size is bounded first (over
	// the network go-containerregistry reads no more than it).
	if man.Config.Size > MaxMetaBytes {
		return nil, fmt.Errorf("image %s: config of %d bytes, more than %d", o.Source, man.Config.Size, MaxMetaBytes)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: read config: %w", o.Source, err)
	}
	sum := sha256.Sum256(raw)
	id := "sha256:" + hex.EncodeToString(sum[:])
	meta, err := s.unpackOnce(img, id, raw, o)
	if err != nil {
		return nil, err
	}
	err = s.withIndex(true, func(ix *index) error {
		for _, n := range o.Names {
			ix.Names[n] = id
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	meta.Names = o.Names
	return meta, nil
}

func (s *Store) unpackOnce(img v1.Image, id string, raw []byte, o AddOptions) (*Meta, error) {
	// An image is in images/ whole or not at all (the rename), so one
	// that is there needs no lock: a pull of an image a long run holds
	// (shared) must not wait for the run.
	if m, err := s.meta(id); err == nil {
		return m, nil
	}
	l, err := s.imageLock(id, unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if m, err := s.meta(id); err == nil {
		return m, nil
	}
	// Holding the image's lock, sbx is the only writer of its tmp/
	// entries: any there are from a pull that was interrupted.
	s.removeStale(hexOf(id) + ".")
	var cfg v1.ConfigFile
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("image %s: config: %w", o.Source, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest digest: %w", o.Source, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: layers: %w", o.Source, err)
	}
	if len(layers) > s.Limits.MaxLayers {
		return nil, fmt.Errorf("image %s: %d layers, more than %d", o.Source, len(layers), s.Limits.MaxLayers)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("image %s: %d layers but the config's rootfs.diff_ids names %d", o.Source, len(layers), len(cfg.RootFS.DiffIDs))
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.Home, "tmp"), hexOf(id)+".")
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			RemoveTree(tmp)
		}
	}()
	os.Chmod(tmp, 0o755)
	root := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	x, err := NewExtractor(root, s.Limits)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	var total, done int64
	if o.Remote {
		for _, layer := range layers {
			if n, err := layer.Size(); err == nil {
				total += n
			}
		}
	}
	meta := &Meta{ID: id, Digest: digest.String(), Source: o.Source, Platform: o.Platform, Created: cfg.Created.Time,
		Env: cfg.Config.Env, Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User}
	for i, layer := range layers {
		d, _ := layer.Digest()
		meta.Layers = append(meta.Layers, d.String())
		if err := s.applyLayer(x, layer, cfg.RootFS.DiffIDs[i], o, &done, total); err != nil {
			return nil, fmt.Errorf("image %s: layer %d (%s): %w", o.Source, i, d, err)
		}
	}
	if err := x.Seal(); err != nil {
		return nil, fmt.Errorf("image %s: seal: %w", o.Source, err)
	}
	meta.Stats = x.Stats()
	meta.Unpacked = time.Now().UTC()
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(tmp, "meta.json"), append(b, '\n')); err != nil {
		return nil, err
	}
	// The rename is what makes the image visible, whole.
	dst := filepath.Join(s.Home, "images", hexOf(id))
	if err := os.Rename(tmp, dst); err != nil {
		return nil, fmt.Errorf("image store: rename %s %s: %w", tmp, dst, err)
	}
	ok = true
	return meta, nil
}

// applyLayer extracts one layer, checking its uncompressed content
// against the config's diff_id (and, over the network, its compressed
// content against the manifest's digest, which go-containerregistry's
// remote reader verifies).
func (s *Store) applyLayer(x *Extractor, layer v1.Layer, diffID v1.Hash, o AddOptions, done *int64, total int64) error {
	var rc io.ReadCloser
	var err error
	if o.Remote {
		var c io.ReadCloser
		if c, err = layer.Compressed(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		counted := &countReader{r: c, done: done, total: total, p: o.Progress}
		rc, err = decompress(counted, c)
	} else {
		rc, err = layer.Uncompressed()
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	tee := io.TeeReader(rc, h)
	if err := x.Apply(tee); err != nil {
		return err
	}
	// What follows the tar's end is hashed too (the diff_id covers the
	// whole stream), up to what the size cap leaves.
	left := s.Limits.MaxBytes - x.st.Bytes
	if n, err := io.CopyN(io.Discard, tee, left+1); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read: %w", err)
	} else if n > left {
		return fmt.Errorf("more than %d bytes after the tar's end", left)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != diffID.String() {
		return fmt.Errorf("digest mismatch: the uncompressed layer is %s, the config's diff_id says %s", got, diffID)
	}
	return nil
}

type countReader struct {
	r     io.Reader
	done  *int64
	total int64
	p     Progress
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	*c.done += int64(n)
	if c.p != nil && n > 0 {
		c.p.Update(*c.done, c.total)
	}
	return n, err
}

func (s *Store) meta(id string) (*Meta, error) {
	b, err := os.ReadFile(filepath.Join(s.Home, "images", hexOf(id), "meta.json"))
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("image %s: meta.json: %w", id, err)
	}
	return &m, nil
}

// removeStale removes tmp/ entries starting with prefix ("" for all)
// whose image lock is free: leftovers of interrupted pulls and removals.
func (s *Store) removeStale(prefix string) []string {
	dir := filepath.Join(s.Home, "tmp")
	ents, _ := os.ReadDir(dir)
	var removed []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if prefix == "" && strings.HasPrefix(e.Name(), importPrefix) {
			l, err := lockDir(filepath.Join(dir, e.Name()), unix.LOCK_EX|unix.LOCK_NB)
			if err != nil {
				continue // an import is reading it
			}
			RemoveTree(filepath.Join(dir, e.Name()))
			l.Close()
		} else if prefix == "" {
			hexid, _, _ := strings.Cut(e.Name(), ".")
			l, err := s.imageLock(hexid, unix.LOCK_EX|unix.LOCK_NB)
			if err != nil {
				continue // a pull of it is running
			}
			RemoveTree(filepath.Join(dir, e.Name()))
			l.Close()
		} else {
			RemoveTree(filepath.Join(dir, e.Name()))
		}
		removed = append(removed, e.Name())
	}
	return removed
}

// NotFoundError is a name the store does not hold.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("image %q: not in the store (see 'sbx image ls'; 'sbx image pull' or 'sbx image import' it)", e.Name)
}

// Lookup resolves a name (as stored, or as a reference normalises to),
// an id or a unique id prefix of at least 12 hex digits.
func (s *Store) Lookup(name string) (string, error) {
	var id string
	err := s.withIndex(false, func(ix *index) error {
		if v, ok := ix.Names[name]; ok {
			id = v
			return nil
		}
		if n, err := Normalize(name); err == nil {
			if v, ok := ix.Names[n]; ok {
				id = v
				return nil
			}
		}
		return nil
	})
	if err != nil || id != "" {
		return id, err
	}
	h := hexOf(name)
	if len(h) >= 12 && isHex(h) {
		ents, _ := os.ReadDir(filepath.Join(s.Home, "images"))
		var hits []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), h) && !strings.Contains(e.Name(), ".") {
				hits = append(hits, e.Name())
			}
		}
		if len(hits) == 1 {
			return "sha256:" + hits[0], nil
		}
	}
	return "", &NotFoundError{Name: name}
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Use resolves name and takes the image's lock shared, so that rm and
// prune leave it while a run has it; Close the file when the run ends.
func (s *Store) Use(name string) (*Meta, *os.File, error) {
	id, err := s.Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	l, err := s.imageLock(id, unix.LOCK_SH)
	if err != nil {
		return nil, nil, err
	}
	m, err := s.meta(id)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("image %q (%s): %w", name, id, err)
	}
	return m, l, nil
}

// Inspect returns the image's meta with its names.
func (s *Store) Inspect(name string) (*Meta, error) {
	id, err := s.Lookup(name)
	if err != nil {
		return nil, err
	}
	m, err := s.meta(id)
	if err != nil {
		return nil, fmt.Errorf("image %q (%s): %w", name, id, err)
	}
	s.withIndex(false, func(ix *index) error {
		m.Names = namesOf(ix, id)
		return nil
	})
	return m, nil
}

func namesOf(ix *index, id string) []string {
	var names []string
	for n, v := range ix.Names {
		if v == id {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// List returns every unpacked image, by id, with its names.
func (s *Store) List() ([]*Meta, error) {
	ents, err := os.ReadDir(filepath.Join(s.Home, "images"))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	var out []*Meta
	err = s.withIndex(false, func(ix *index) error {
		for _, e := range ents {
			m, err := s.meta("sha256:" + e.Name())
			if err != nil {
				continue
			}
			m.Names = namesOf(ix, m.ID)
			out = append(out, m)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Unpacked.After(out[j].Unpacked) })
	return out, err
}

// Remove drops name; the tree goes too when no other name has it and no
// run holds it (else prune takes it later). It says whether it went.
func (s *Store) Remove(name string) (id string, gone bool, err error) {
	if id, err = s.Lookup(name); err != nil {
		return "", false, err
	}
	var left []string
	err = s.withIndex(true, func(ix *index) error {
		byName := false
		for _, n := range []string{name, normalized(name)} {
			if ix.Names[n] == id {
				delete(ix.Names, n)
				byName = true
			}
		}
		if !byName {
			// Given as an id: every name of it goes.
			for _, n := range namesOf(ix, id) {
				delete(ix.Names, n)
			}
		}
		left = namesOf(ix, id)
		return nil
	})
	if err != nil || len(left) > 0 {
		return id, false, err
	}
	gone, err = s.removeImage(id)
	return id, gone, err
}

// removeImage removes an image's tree unless a run holds it: renamed out
// of images/ first, so no run can find it half-removed.
func (s *Store) removeImage(id string) (bool, error) {
	l, err := s.imageLock(id, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer l.Close()
	src := filepath.Join(s.Home, "images", hexOf(id))
	dst, err := os.MkdirTemp(filepath.Join(s.Home, "tmp"), hexOf(id)+".rm.")
	if err != nil {
		return false, fmt.Errorf("image store: %w", err)
	}
	os.Remove(dst)
	if err := os.Rename(src, dst); err != nil {
		return false, fmt.Errorf("image store: rename %s %s: %w", src, dst, err)
	}
	if err := RemoveTree(dst); err != nil {
		return false, err
	}
	// The lock file stays: a run that opened it before the removal must
	// not share a lock with a pull that would make a new one.
	return true, nil
}

// Prune removes the images no name refers to and no run holds, and the
// leftovers of interrupted pulls. It returns what it removed.
func (s *Store) Prune() ([]string, error) {
	var named map[string]bool
	err := s.withIndex(false, func(ix *index) error {
		named = map[string]bool{}
		for _, v := range ix.Names {
			named[v] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ents, _ := os.ReadDir(filepath.Join(s.Home, "images"))
	var removed []string
	for _, e := range ents {
		id := "sha256:" + e.Name()
		if named[id] {
			continue
		}
		if gone, err := s.removeImage(id); err != nil {
			return removed, err
		} else if gone {
			removed = append(removed, id)
		}
	}
	for _, t := range s.removeStale("") {
		removed = append(removed, "tmp/"+t)
	}
	return removed, nil
}
