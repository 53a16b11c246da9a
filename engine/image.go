package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/rootfs"
)

// What of images both builds share: the Config's Image, the Result's
// annotation, and the typed error of the lean build. The store's side,
// with package image and go-containerregistry, is image_store.go, in
// the full sbx only.

// Image is the OCI image a Config runs on: what the Result says of it, its
// Entrypoint and Cmd, and the interpreter a sandbox on it found when it
// was stored. The store's shared lock on it is held from Build to the
// Config's Close, so that `sbx image rm` and prune leave its tree alone
// while a run may still use it.
type Image struct {
	Info *nsjail.ImageInfo `json:"info"`
	// Argv is Entrypoint then Cmd: the payload when none is given.
	Argv   []string            `json:"argv,omitempty"`
	Python *nsjail.Interpreter `json:"python,omitempty"`
	lock   *os.File
}

// Progress is told how a pull goes: done of total bytes (compressed, as
// transferred). It is image.Progress's method set, declared here so that
// a Request names it without linking package image (the lean sbx).
type Progress interface {
	Update(done, total int64)
}

// NeedsFullError is Build's error, in the lean sbx, for a profile that
// names an image (its image key, or --image): the lean sbx links no
// image support (image_lean.go), and the CLI hands the whole command to
// the full sbx it embeds, before anything has read stdin or changed
// anything. The full sbx never returns it.
type NeedsFullError struct {
	// Image is the profile's image, and Origin where it was set.
	Image  string
	Origin profiles.Origin
}

func (e *NeedsFullError) Error() string {
	return fmt.Sprintf("image %q (%s): this is the lean sbx, which runs no image; the full sbx it embeds does", e.Image, e.Origin)
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
