package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/image"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/rootfs"
)

// Image is the OCI image a Config runs on: what the Result says of it, its
// Entrypoint and Cmd, and the interpreter a sandbox on it found when it
// was stored. The store's shared lock on it is held from Build to the
// Config's Close, so that `sbx image rm` and prune leave its tree alone
// while a run may still use it.
type Image struct {
	Info *nsjail.ImageInfo `json:"info"`
	// Argv is Entrypoint then Cmd: the payload when none is given.
	Argv   []string           `json:"argv,omitempty"`
	Python *image.Interpreter `json:"python,omitempty"`
	lock   *os.File
}

// Close releases what the Config holds: its image's shared lock. A Config
// without an image holds nothing; Close is safe on nil and twice.
func (cfg *Config) Close() error {
	if cfg == nil || cfg.Image == nil || cfg.Image.lock == nil {
		return nil
	}
	err := cfg.Image.lock.Close()
	cfg.Image.lock = nil
	return err
}

// ImageArgv is the image's Entrypoint and Cmd, nil without an image.
func (cfg *Config) ImageArgv() []string {
	if cfg == nil || cfg.Image == nil {
		return nil
	}
	return cfg.Image.Argv
}

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
func useImage(prof *profiles.Profile, progress image.Progress) (*Image, error) {
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
		Python: m.Python,
		lock:   lock,
	}, nil
}

// annotate names cfg's image in the Result, and the interpreter when the
// payload is a Python one: the image's as a sandbox on it found it, else
// the one PATH finds in the root (rootInterpreter).
func annotate(res *nsjail.Result, cfg *Config, p nsjail.Payload) {
	if cfg.Image != nil {
		res.Image = cfg.Image.Info
	}
	if len(p.Argv) == 0 || p.Argv[0] != "python3" {
		return
	}
	if cfg.Image != nil && cfg.Image.Python != nil {
		res.Interpreter = &nsjail.Interpreter{Path: cfg.Image.Python.Path, Version: cfg.Image.Python.Version}
		return
	}
	root := cfg.Profile.Filesystem.Rootfs
	if root == "" {
		root = "/"
	}
	res.Interpreter = rootInterpreter(root, append(append([]string{}, cfg.Spec.Env...), p.Env...))
}

// pythonVersionRE finds the version in an interpreter's file name:
// python3.11 -> 3.11.
// Compiled on first use, not at package init: every sbx process, the
// init included, runs every package's init (issue 13).
var pythonVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^python(\d+\.\d+)$`) })

// rootInterpreter names the python3 the sandbox's PATH finds in a root
// that is not an image's, resolved as the sandbox sees it: the host's
// (root "/", whose /usr, /bin, /lib* the sandbox binds at the same
// paths) or a --rootfs directory (resolved with RESOLVE_IN_ROOT, as the
// extractor does). Nothing is run on the host to ask its version: it is
// the major.minor of the file's name (python3.11 -> "3.11"), "" if the
// name has none. nil when PATH finds no python3.
func rootInterpreter(root string, env []string) *nsjail.Interpreter {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		real, ok := resolveIn(root, filepath.Join(dir, "python3"))
		if !ok {
			continue
		}
		ver := ""
		if m := pythonVersionRE().FindStringSubmatch(filepath.Base(real)); m != nil {
			ver = m[1]
		}
		return &nsjail.Interpreter{Path: real, Version: ver}
	}
	return nil
}

// resolveIn resolves p inside root to an executable regular file, and
// returns its path as the sandbox sees it.
func resolveIn(root, p string) (string, bool) {
	if root == "/" {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", false
		}
		top := strings.Split(real, "/")[1]
		if !slices.Contains(rootfs.HostTop(), top) || !isExecutable(real) {
			return "", false
		}
		return real, true
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(rfd)
	// openat2(2) RESOLVE_IN_ROOT (Linux 5.6): the tree's links resolve as
	// they would with it as /, never to the host's files.
	fd, err := unix.Openat2(rfd, strings.TrimPrefix(p, "/"), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return "", false
	}
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return "", false
	}
	rel, ok := strings.CutPrefix(real, strings.TrimSuffix(root, "/")+"/")
	if !ok {
		return "", false
	}
	return "/" + rel, true
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
