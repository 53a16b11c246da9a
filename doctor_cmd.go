package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/doctor"
	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/fullbin"
	"github.com/sbx-sandbox/sbx/internal/initbin"
	"github.com/sbx-sandbox/sbx/internal/version"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/seccomp"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "say what sbx can enforce on this host, from where it runs, and how to fix what is missing",
		Description: "Probes unprivileged user namespaces (and what forbids them), the cgroup mode and\n" +
			"the controllers sbx can use from its own cgroup, seccomp and user notification,\n" +
			"CLONE_INTO_CGROUP, pidfd, Landlock, the rootfs's Python and data stack, and runs\n" +
			"a real trial sandbox. Exit status 0 when everything the default profile needs\n" +
			"is there (a missing cgroup is a warning: limits then fall back to rlimits).\n\n" +
			"--self-test runs sbx's own escape attempts instead, each in a real sandbox built\n" +
			"the way `sbx exec` builds one (standard or strict): the seccomp probe, fd leaks,\n" +
			"/proc, the host's loopback and cloud metadata, the read-only root, capabilities,\n" +
			"nested user namespaces, prlimit and signals to the init, a forged SIGXCPU, a\n" +
			"denial flood, a proxy method flood, hardlink amplification and the inotify\n" +
			"quota. Each is reported blocked or NOT BLOCKED with one line saying why; exit\n" +
			"status 1 if any is not blocked. It takes some seconds.",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object"},
			&cli.BoolFlag{Name: "self-test", Usage: "run sbx's escape attempts on this host and say which are blocked"},
			&cli.StringFlag{Name: "image", Usage: "run the trial sandbox on OCI image `NAME|REF` and check its python3 and data stack"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("self-test") {
				rep := doctor.SelfTest(doctor.Attempts(), runAttempt)
				if c.Bool("json") {
					printJSON(rep)
				} else {
					printSelfTest(rep)
				}
				if !rep.OK {
					return cli.Exit("", 1)
				}
				return nil
			}
			if c.String("image") != "" && !engine.ImageSupport {
				// The trial sandbox on an image: the full sbx makes the
				// whole report, as it would for sbx doctor alone.
				return handOffNow("doctor --image")
			}
			rep := runDoctor(c.String("image"))
			if c.Bool("json") {
				printJSON(rep)
			} else {
				printDoctor(rep)
			}
			if !rep.OK {
				return cli.Exit("", 1)
			}
			return nil
		},
	}
}

// doctorReport is doctor's report plus the cgroup facts tests and tools
// read directly.
type doctorReport struct {
	*doctor.Report
	// Version and Commit say which sbx made the report.
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Cgroup  struct {
		Mode        string   `json:"mode"`
		Controllers []string `json:"controllers"`
	} `json:"cgroup"`
	Python *trialPython `json:"python,omitempty"`
}

type trialPython struct {
	Version string          `json:"version"`
	Modules map[string]bool `json:"modules"`
}

func runDoctor(img string) *doctorReport {
	out := &doctorReport{Version: version.Version(), Commit: version.Commit()}
	mode, ctrls, cgErr := cgroup.Probe()
	out.Cgroup.Mode, out.Cgroup.Controllers = string(mode), ctrls
	if out.Cgroup.Controllers == nil {
		out.Cgroup.Controllers = []string{}
	}
	probes := []doctor.Probe{
		{Name: "user namespaces", Run: doctor.UserNSSysctls},
		{Name: "cgroup", Run: func() doctor.Check {
			return doctor.Cgroup(func() (string, []string, error) { return string(mode), ctrls, cgErr }, doctor.Unified())
		}},
		{Name: "CLONE_INTO_CGROUP", Run: func() doctor.Check { return doctor.CloneIntoCgroup(string(mode)) }},
		{Name: "seccomp", Run: seccompCheck},
		{Name: "pidfd", Run: doctor.Pidfd},
		{Name: "Landlock", Run: func() doctor.Check { return doctor.Landlock(nsjail.LandlockABI()) }},
		{Name: "sbx binary", Run: sbxBinaryCheck},
		{Name: "init binary", Run: func() doctor.Check {
			e := initbin.Get()
			return doctor.InitBinary(initbin.Embedded(), e.Kind == initbin.KindMemfd, e.Describe(), e.Probe())
		}},
		{Name: "trial sandbox", Run: func() doctor.Check { c, py := trialSandbox(img); out.Python = py; return c }},
		{Name: pythonCheckName(img), Run: func() doctor.Check { return pythonCheck(out.Python) }},
	}
	out.Report = doctor.Run(probes)
	return out
}

// sbxBinaryCheck: which build runs, and, for the lean sbx, a real
// hand-off of `sbx serve --help` to the full one.
func sbxBinaryCheck() doctor.Check {
	var size int64
	if fi, err := os.Stat("/proc/self/exe"); err == nil {
		size = fi.Size()
	}
	var err error
	if build == buildLean {
		err = fullbin.Probe([]string{serveName, "--help"}, serveUsage)
		// The child's message, without what the check's line says.
		if prefix := handOffFailed(serveName, errors.New("")); err != nil && strings.HasPrefix(err.Error(), prefix) {
			err = errors.New(strings.TrimPrefix(err.Error(), prefix))
		}
	}
	return doctor.SbxBinary(build == buildLean, size, int64(fullbin.Size()), err)
}

// seccompCheck: the kernel's support, then both built-in policies compile.
func seccompCheck() doctor.Check {
	c := doctor.SeccompUserNotif()
	if c.Status == doctor.Fail {
		return c
	}
	var compiled []string
	for _, name := range seccomp.Names() {
		p, err := seccomp.Builtin(name)
		if err == nil && p != nil {
			_, err = seccomp.Compile(p)
			compiled = append(compiled, name)
		}
		if err != nil {
			return doctor.Check{Status: doctor.Fail, Detail: fmt.Sprintf("policy %s does not compile: %v", name, err), Fix: "rebuild sbx against libseccomp 2.5 or later"}
		}
	}
	c.Detail += "; policies " + strings.Join(compiled, " and ") + " compile"
	return c
}

// trialScript reports the rootfs's Python and which of the data stack
// imports.
const trialScript = `import importlib, json, sys
mods = {}
for m in ("numpy", "pandas", "matplotlib"):
    try:
        importlib.import_module(m)
        mods[m] = True
    except Exception:
        mods[m] = False
print(json.dumps({"version": sys.version.split()[0], "modules": mods}))`

func pythonCheckName(img string) string {
	if img != "" {
		return "image python3"
	}
	return "rootfs python3"
}

// trialSandbox builds a real sandbox with the default profile (on image
// img if given: set before engine.FromProfile plans the Spec, which
// resolves it) and runs the trial script in it.
func trialSandbox(img string) (doctor.Check, *trialPython) {
	prof, err := profiles.Load(profiles.DefaultName)
	if err != nil {
		return doctor.Check{Status: doctor.Fail, Detail: err.Error()}, nil
	}
	prof.Image = img
	cfg, err := engine.FromProfile(newRunID(), prof, nil, "")
	if err != nil {
		c := doctor.Check{Status: doctor.Fail, Detail: err.Error()}
		if img != "" {
			c.Fix = "sbx image ls; sbx image pull or import it"
		}
		return c, nil
	}
	defer cfg.Close()
	cfg.Host.Output, cfg.Host.Wall = 1<<20, 60*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res := engine.Run(ctx, cfg, nsjail.Payload{Argv: []string{"python3", "-c", trialScript}}, engine.Options{})
	switch {
	case res.Status == nsjail.StatusSetupError:
		return doctor.Check{Status: doctor.Fail, Detail: res.Message, Fix: "see the other checks; user namespaces are the usual cause"}, nil
	case res.Status == nsjail.StatusNotFound:
		return doctor.Check{Status: doctor.OK, Detail: fmt.Sprintf("a sandbox was built and run in %v (no python3 in it)", time.Since(start).Round(time.Millisecond))}, nil
	case res.Status != nsjail.StatusOK:
		return doctor.Check{Status: doctor.Fail, Detail: fmt.Sprintf("the trial payload ended with %s: %s %s", res.Status, res.Message, strings.TrimSpace(res.Stderr))}, nil
	}
	var py trialPython
	if err := json.Unmarshal([]byte(res.Stdout), &py); err != nil {
		return doctor.Check{Status: doctor.Fail, Detail: "the trial payload printed " + res.Stdout}, nil
	}
	d := fmt.Sprintf("built, ran and tore down a sandbox in %v", time.Since(start).Round(time.Millisecond))
	if l := res.Layers["cgroup"]; l.State == nsjail.LayerDegraded {
		d += "; " + l.Detail
	}
	return doctor.Check{Status: doctor.OK, Detail: d}, &py
}

func pythonCheck(py *trialPython) doctor.Check {
	if py == nil {
		return doctor.Check{Status: doctor.Fail, Detail: "no python3 ran in the trial sandbox", Fix: "install python3 on the host (the default rootfs is the host's /usr), or give --rootfs a tree with python3"}
	}
	var have, missing []string
	for _, m := range []string{"numpy", "pandas", "matplotlib"} {
		if py.Modules[m] {
			have = append(have, m)
		} else {
			missing = append(missing, m)
		}
	}
	c := doctor.Check{Status: doctor.OK, Detail: "Python " + py.Version}
	if len(have) > 0 {
		c.Detail += "; imports " + strings.Join(have, ", ")
	}
	if len(missing) > 0 {
		c.Status = doctor.Info
		c.Detail += "; not installed: " + strings.Join(missing, ", ")
		c.Fix = "apt-get install python3-numpy python3-pandas python3-matplotlib, for data analysis"
	}
	return c
}

func printDoctor(r *doctorReport) {
	fmt.Printf("sbx doctor: %s, kernel %s, uid %d\n\n", versionLine(), r.Kernel, r.UID)
	for _, c := range r.Checks {
		fmt.Printf("  %-4s  %-18s %s\n", strings.ToUpper(string(c.Status)), c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Printf("  %-4s  %-18s fix: %s\n", "", "", c.Fix)
		}
	}
	if r.OK {
		fmt.Println("\nEverything the default profile needs is here.")
	} else {
		fmt.Println("\nThe default profile cannot run here: fix the FAIL lines above.")
	}
}

// attemptGrace is how long past its wall limit an attempt may take before
// the self-test gives up on it (sbx must never take that long).
const attemptGrace = 15 * time.Second

// runAttempt runs one self-test attempt the way execAction runs a payload:
// the built-in profile, its Spec, its limits and, with AllowHost, the
// proxy; then it does the attempt's host side.
func runAttempt(a doctor.Attempt) *doctor.Outcome {
	o := &doctor.Outcome{Host: map[string]string{}}
	src, err := doctor.Payload(a.Payload)
	if err != nil {
		o.Err = err
		return o
	}
	prof, err := profiles.Load(a.Profile)
	if err != nil {
		o.Err = err
		return o
	}
	if a.AllowHost != "" {
		prof.Network.Mode, prof.Network.Allow = profiles.NetworkAllow, []string{a.AllowHost}
	}
	cfg, err := engine.FromProfile(newRunID(), prof, nil, "")
	if err != nil {
		o.Err = err
		return o
	}
	defer cfg.Close()
	cfg.Host.Wall = min(cfg.Host.Wall, 20*time.Second)
	args := append([]string{"python3", "-c", src}, a.Args...)
	var opts engine.Options
	var after func()
	finished := make(chan struct{})
	switch a.Host {
	case doctor.HostListener:
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			o.Err = fmt.Errorf("host listener: %w", err)
			return o
		}
		defer ln.Close()
		args = append(args, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
		after = func() { o.Host["listener"] = acceptedAny(ln.(*net.TCPListener)) }
	case doctor.HostOutputDir:
		dir, err := os.MkdirTemp("", "sbx-selftest-")
		if err != nil {
			o.Err = err
			return o
		}
		defer os.RemoveAll(dir)
		opts.OutputDir = filepath.Join(dir, "out")
		after = func() { o.OutputBytes = bytesToRead(opts.OutputDir) }
	case doctor.HostInotify:
		pr, pw := io.Pipe()
		ready := newLineSignal()
		opts.Stdin, opts.Stdout = pr, ready
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pw.Close()
			select {
			case <-ready.ch:
				o.Host["inotify_init1"] = hostInotify()
			case <-finished:
				o.Host["inotify_init1"] = "not tried: the payload ended before it said it was ready"
			}
		}()
		after = wg.Wait
	}
	hwm := peakRSSKB()
	done := make(chan *nsjail.Result, 1)
	go func() { done <- engine.Run(context.Background(), cfg, nsjail.Payload{Argv: args}, opts) }()
	select {
	case o.Result = <-done:
		close(finished)
	case <-time.After(cfg.Host.Wall + attemptGrace):
		o.Err = fmt.Errorf("sbx did not return within %v of the payload's %v wall limit", attemptGrace, cfg.Host.Wall)
		return o
	}
	if after != nil {
		after()
	}
	if cfg.Proxy != nil {
		o.Host["supervisor_rss_growth"] = fmt.Sprintf("%d KiB", peakRSSKB()-hwm)
	}
	var out any
	if json.Unmarshal([]byte(strings.TrimSpace(o.Result.Stdout)), &out) == nil {
		o.Out = out
	}
	return o
}

// acceptedAny says whether anything connected to ln during the run: the
// run is over, so a connection would wait in the listen queue. One
// non-blocking accept4(2) asks, rather than Accept with a short deadline:
// Go checks a deadline before it tries, so a thread held up past it (a
// loaded machine) heard "no connection" with one queued, and the
// isolation check passed (fail open). Anything but "no connection"
// fails the check (doctor/selftest.go), an error here included.
func acceptedAny(ln *net.TCPListener) string {
	rc, err := ln.SyscallConn()
	if err != nil {
		return fmt.Sprintf("not checked: %v", err)
	}
	var sa unix.Sockaddr
	var aerr error
	// Control, not Read (a listener's raw Read is EINVAL): Go keeps the
	// socket O_NONBLOCK, so accept4 answers EAGAIN at once with nothing
	// queued.
	err = rc.Control(func(fd uintptr) {
		var nfd int
		for {
			nfd, sa, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
			if aerr != unix.EINTR {
				break
			}
		}
		if aerr == nil {
			unix.Close(nfd)
		}
	})
	switch {
	case err != nil:
		return fmt.Sprintf("not checked: %v", err)
	case aerr == unix.EAGAIN:
		return "no connection"
	case aerr != nil:
		return fmt.Sprintf("not checked: accept4: %v", aerr)
	}
	if in4, ok := sa.(*unix.SockaddrInet4); ok {
		return fmt.Sprintf("a connection from %s", netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)))
	}
	return "a connection"
}

// bytesToRead is what a consumer reading every regular file below dir
// reads: each name counts, hard links included.
func bytesToRead(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// hostInotify tries inotify_init1(2) on the host side, as sbx's own uid.
func hostInotify() string {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return unix.ErrnoName(errno)
		}
		return err.Error()
	}
	unix.Close(fd)
	return "ok"
}

// peakRSSKB is this process's VmHWM.
func peakRSSKB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb
		}
	}
	return 0
}

// lineSignal closes ch at the first newline written to it.
type lineSignal struct {
	once sync.Once
	ch   chan struct{}
}

func newLineSignal() *lineSignal { return &lineSignal{ch: make(chan struct{})} }

func (l *lineSignal) Write(b []byte) (int, error) {
	if strings.IndexByte(string(b), '\n') >= 0 {
		l.once.Do(func() { close(l.ch) })
	}
	return len(b), nil
}

func printSelfTest(r *doctor.SelfTestReport) {
	fmt.Printf("sbx doctor --self-test: kernel %s, uid %d\n\n", r.Kernel, r.UID)
	for _, f := range r.Findings {
		fmt.Printf("  %-11s  %-22s %s\n", f.Verdict, f.Name, f.Detail)
		if !f.Blocked {
			fmt.Printf("  %-11s  %-22s blocked means: %s (profile %s)\n", "", "", f.Means, f.Profile)
		}
	}
	if r.OK {
		fmt.Println("\nEvery escape attempt was blocked.")
	} else {
		fmt.Println("\nSome attempts were NOT BLOCKED: see above.")
	}
}
