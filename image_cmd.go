package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/image"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/rootfs"
)

func imageCommand() *cli.Command {
	noArgs := func(c *cli.Context, n int, what string) error {
		if c.NArg() != n {
			return usageError(c, fmt.Errorf("want %s, got %d arguments", what, c.NArg()), false)
		}
		return nil
	}
	return &cli.Command{
		Name:  "image",
		Usage: "pull, import, list and remove the OCI images a run may use as its root",
		Description: "Images live unpacked, once per image, in a content-addressed store: /var/lib/sbx\n" +
			"as root, $XDG_DATA_HOME/sbx (~/.local/share/sbx) otherwise, SBX_HOME if set.\n" +
			"Run on one with 'sbx exec --image NAME task.py' or image = \"NAME\" in a profile.",
		OnUsageError: usageError,
		Subcommands: []*cli.Command{
			{
				Name: "pull", Usage: "fetch an image from its registry (docker config credentials)", ArgsUsage: "REF",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := noArgs(c, 1, "one REF such as python:3.11-slim"); err != nil {
						return err
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					m, err := pull(s, c.Args().First(), false)
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					fmt.Printf("%s %s\n", m.Names[0], m.Digest)
					return nil
				},
			},
			{
				Name: "import", Usage: "add an image from a docker save tarball, an OCI archive or an OCI layout directory", ArgsUsage: "FILE",
				Flags:        []cli.Flag{&cli.StringFlag{Name: "name", Usage: "store it as `NAME` (default: the archive's own tag, else the file's name)"}},
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := noArgs(c, 1, "one FILE"); err != nil {
						return err
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					m, err := s.Import(c.Args().First(), c.String("name"))
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					probePython(s, m)
					fmt.Printf("%s %s\n", m.Names[0], m.Digest)
					return nil
				},
			},
			{
				Name: "ls", Usage: "list the images in the store",
				Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := noArgs(c, 0, "no arguments"); err != nil {
						return err
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					list, err := s.List()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					if c.Bool("json") {
						if list == nil {
							list = []*image.Meta{}
						}
						return printIndented(list)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tID\tSIZE\tUNPACKED")
					for _, m := range list {
						names := m.Names
						if len(names) == 0 {
							names = []string{"<none>"}
						}
						for _, n := range names {
							fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", familiar(n), shortID(m.ID), humanBytes(m.Stats.Bytes), m.Unpacked.Format(time.RFC3339))
						}
					}
					return tw.Flush()
				},
			},
			{
				Name: "inspect", Usage: "print what the store knows of an image, as JSON", ArgsUsage: "NAME",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := noArgs(c, 1, "one NAME"); err != nil {
						return err
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					m, err := s.Inspect(c.Args().First())
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return printIndented(m)
				},
			},
			{
				Name: "rm", Usage: "remove an image's name (and its tree, once no name and no run has it)", ArgsUsage: "NAME...",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return usageError(c, errors.New("want one NAME or more"), false)
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					var errs []error
					for _, n := range c.Args().Slice() {
						id, gone, err := s.Remove(n)
						switch {
						case err != nil:
							errs = append(errs, err)
						case gone:
							fmt.Printf("removed %s (%s)\n", n, shortID(id))
						default:
							fmt.Printf("untagged %s (%s: another name or a running sandbox still has it)\n", n, shortID(id))
						}
					}
					if err := errors.Join(errs...); err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return nil
				},
			},
			{
				Name: "prune", Usage: "remove the images no name refers to, and leftovers of interrupted pulls",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := noArgs(c, 0, "no arguments"); err != nil {
						return err
					}
					s, err := openStore()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					removed, err := s.Prune()
					for _, r := range removed {
						fmt.Println("removed " + r)
					}
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return nil
				},
			},
		},
	}
}

func openStore() (*image.Store, error) {
	home, err := image.DefaultHome()
	if err != nil {
		return nil, err
	}
	return image.Open(home)
}

func printIndented(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}

// familiar is a stored name as docker prints it: python:3.11, not
// index.docker.io/library/python:3.11 (lookups accept either).
func familiar(n string) string {
	if r, ok := strings.CutPrefix(n, "index.docker.io/library/"); ok {
		return r
	}
	if r, ok := strings.CutPrefix(n, "index.docker.io/"); ok {
		return r
	}
	return n
}

func shortID(id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// pull fetches ref, with a progress bar when stderr is a terminal and
// quiet is not set. SIGINT cancels it; what was half-unpacked stays in
// the store's tmp/, invisible, until the next pull or prune.
func pull(s *image.Store, ref string, quiet bool) (*image.Meta, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var p image.Progress
	if !quiet && isTerminal(os.Stderr) {
		bar := &progressBar{ref: ref}
		defer bar.done()
		p = bar
	}
	m, err := s.Pull(ctx, ref, p)
	if err == nil {
		probePython(s, m)
	}
	return m, err
}

// pythonProbe prints the interpreter's real path and version.
const pythonProbe = "import os, sys; print(os.path.realpath(sys.executable)); print(sys.version.split()[0])"

// probePython runs python3 once in a sandbox on a newly stored image (the
// default profile: the image's code is as untrusted as any payload) and
// records what it found, for the Results of the runs on it. An image
// without python3, or a host where no sandbox can be built, records
// nothing; the image is stored either way.
func probePython(s *image.Store, m *image.Meta) {
	if m.Python != nil {
		return
	}
	prof, err := profiles.Load(profiles.DefaultName)
	if err != nil {
		return
	}
	prof.Filesystem.Rootfs, prof.ImageEnv = s.Root(m.ID), m.Env
	spec, err := prof.Spec(newRunID(), nil)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := nsjail.Run(ctx, &nsjail.Job{
		Spec:        spec,
		Payload:     nsjail.Payload{Argv: []string{"python3", "-c", pythonProbe}},
		OutputLimit: 64 << 10,
		Timeout:     30 * time.Second,
		Limits:      profileLimits(prof),
	})
	path, ver, ok := strings.Cut(strings.TrimSpace(res.Stdout), "\n")
	if res.Status != nsjail.StatusOK || !ok || !strings.HasPrefix(path, "/") || len(res.Stdout) > 4096 {
		return
	}
	py := &image.Interpreter{Path: path, Version: strings.TrimSpace(ver)}
	if s.SetPython(m.ID, py) == nil {
		m.Python = py
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressBar redraws one stderr line, at most ten times a second.
type progressBar struct {
	ref  string
	last time.Time
	any  bool
}

func (b *progressBar) Update(done, total int64) {
	if now := time.Now(); now.Sub(b.last) >= 100*time.Millisecond || done == total {
		b.last, b.any = now, true
		const width = 30
		fill := 0
		if total > 0 {
			fill = int(min(done, total) * width / total)
		}
		fmt.Fprintf(os.Stderr, "\rpulling %s [%s%s] %s/%s ", b.ref, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), humanBytes(done), humanBytes(total))
	}
}

func (b *progressBar) done() {
	if b.any {
		fmt.Fprintln(os.Stderr)
	}
}

// runImage is the image a run uses: what the Result says of it, its
// Entrypoint and Cmd, and the store's shared lock, held for the run so
// that `sbx image rm` and prune leave its tree alone.
type runImage struct {
	info   *nsjail.ImageInfo
	argv   []string
	python *image.Interpreter
	lock   *os.File
}

func (r *runImage) defaultArgv() []string {
	if r == nil {
		return nil
	}
	return r.argv
}

// annotate names the image in the Result, and the interpreter when the
// payload is a Python one: the image's as a sandbox on it found it, else
// the one PATH finds in the root (rootInterpreter).
func (r *runImage) annotate(res *nsjail.Result, argv []string, root string, env []string) {
	python := len(argv) > 0 && argv[0] == "python3"
	if r == nil {
		if python {
			res.Interpreter = rootInterpreter(root, env)
		}
		return
	}
	res.Image = r.info
	switch {
	case r.python != nil && python:
		res.Interpreter = &nsjail.Interpreter{Path: r.python.Path, Version: r.python.Version}
	case python:
		res.Interpreter = rootInterpreter(root, env)
	}
}

func (r *runImage) release() {
	if r != nil && r.lock != nil {
		r.lock.Close()
	}
}

// pythonVersionRE finds the version in an interpreter's file name:
// python3.11 -> 3.11.
var pythonVersionRE = regexp.MustCompile(`^python(\d+\.\d+)$`)

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
		if m := pythonVersionRE.FindStringSubmatch(filepath.Base(real)); m != nil {
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

// dataImage is the name `make image-data` imports its image as.
const dataImage = "sbx-data"

// pullable says whether a name the store does not hold is pulled on
// first use: a reference with an explicit tag or digest
// ("python:3.11-slim", "ghcr.io/o/r@sha256:..."). A bare name ("mine",
// "sbx-data") is a local one that was never imported: pulling
// docker.io/library/mine instead would run someone else's image.
func pullable(ref string) bool {
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
// store does not hold (quietly under --json), and makes its tree the profile's
// rootfs and its Env the profile's ImageEnv. nil when the profile has no
// image.
func useImage(prof *profiles.Profile, quiet bool) (*runImage, error) {
	if prof.Image == "" {
		return nil, nil
	}
	s, err := openStore()
	if err != nil {
		return nil, err
	}
	m, lock, err := s.Use(prof.Image)
	var nf *image.NotFoundError
	if errors.As(err, &nf) {
		if !pullable(prof.Image) {
			if prof.Image == dataImage {
				err = fmt.Errorf("%w; 'make image-data' builds it", err)
			}
			return nil, err
		}
		if _, perr := pull(s, prof.Image, quiet); perr != nil {
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
	return &runImage{
		info:   &nsjail.ImageInfo{Name: prof.Image, ID: m.ID, Digest: m.Digest},
		argv:   append(append([]string{}, m.Entrypoint...), m.Cmd...),
		python: m.Python,
		lock:   lock,
	}, nil
}
