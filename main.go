//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command sbx runs untrusted code — mostly Python written by AI agents — in
// a sandbox built from Linux namespaces, with no daemon and no root needed.
// This file is the CLI only: flags become a Spec, nsjail.Run does the rest.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/cgroup"
	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/initbin"
	"github.com/sbx-sandbox/sbx/internal/leanexec" // its init first: one P for an unprivileged exec, before the other inits
	"github.com/sbx-sandbox/sbx/internal/oserr"
	"github.com/sbx-sandbox/sbx/internal/sigfwd" // exec's signals registered from its init
	"github.com/sbx-sandbox/sbx/internal/version"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/seccomp"
)

func main() {
	// The re-executed init must not see the CLI at all.
	if nsjail.IsInit() {
		nsjail.Init()
	}
	handOff(os.Args) // sbx serve: the lean sbx execs the full one (internal/fullbin)
	t0 := nsjail.MonotonicNS()
	initbin.PrepareForExec(os.Args) // the init's memfd, beside the CLI (issue 13)
	if len(os.Args) > 1 && os.Args[1] == "exec" && runtime.GOMAXPROCS(0) > 1 {
		// The cgroup layout, beside the CLI too, on the second P. On one
		// P (an unprivileged exec, internal/leanexec) the goroutine ran
		// inside signal.Notify's hand-offs and delayed the start instead.
		cgroup.Prefetch()
	}
	code := runWith(os.Args, deps{t0: t0, seccompRules: policyRules, signals: sigfwd.Early()})
	initbin.ReleaseCopy() // the memfd's copy process, if no sandbox reaped it
	os.Exit(code)
}

// deps are what main hands the commands, instead of package globals.
type deps struct {
	// t0 is when sbx started, on CLOCK_MONOTONIC, for --debug-timings.
	t0 int64
	// seccompRules prints the rules of a seccomp policy for `sbx profile
	// show`, one line per rule with its reason; nil prints the policy by
	// name only (profiles/ need not import seccomp/).
	seccompRules func(policy string) ([]string, error)
	// signals is sbx exec's registration of the signals it forwards,
	// begun by a package init (internal/sigfwd); nil registers them in
	// line, in the exec action.
	signals *sigfwd.Forwarding
}

// metaExit is the key of App.Metadata where a command that cannot return
// an error (CommandNotFound) leaves its exit status.
const metaExit = "exit"

// policyRules is the effective seccomp policy, entry by entry with its
// reason, for `sbx profile show`: for "none", the init guard a run still
// loads.
func policyRules(name string) ([]string, error) {
	p, err := seccomp.ForRun(name)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(p.String(), "\n"), "\n"), nil
}

// run is runWith at the time of the call, without the seccomp hook.
func run(args []string) int {
	return runWith(args, deps{t0: nsjail.MonotonicNS()})
}

func runWith(args []string, d deps) int {
	app := newAppWith(args, d)
	if err := app.Run(args); err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "sbx: "+msg)
			}
			return ec.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "sbx: "+err.Error())
		return nsjail.ExitSbxFailed
	}
	if code, ok := app.Metadata[metaExit].(int); ok {
		return code
	}
	return 0
}

func usageError(c *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see '%s --help')", explainFlagError(err, c.Command.Flags), helpName(c)), nsjail.ExitSbxFailed)
}

// explainFlagError rewrites the flag package's "flag provided but not
// defined: -memroy" as "unknown flag --memroy (did you mean --memory?)",
// the hint naming the closest of flags (as profile keys get one).
func explainFlagError(err error, flags []cli.Flag) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err.Error()
	}
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	msg := "unknown flag " + dashed(name)
	if best := profiles.Closest(name, names); best != "" {
		msg += " (did you mean " + dashed(best) + "?)"
	}
	return msg
}

// dashed is a flag's name as it is written: -c, --memory.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// commandNotFound is for `sbx X` and `sbx profile X`: the hint names the
// closest command and the help of the command that has them.
func commandNotFound(c *cli.Context, name string) {
	c.App.Metadata[metaExit] = nsjail.ExitSbxFailed
	cmds := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 {
		cmds = c.Command.Subcommands
	}
	var names []string
	for _, cmd := range cmds {
		names = append(names, cmd.Names()...)
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if best := profiles.Closest(name, names); best != "" {
		msg += " (did you mean " + best + "?)"
	}
	fmt.Fprintf(os.Stderr, "sbx: %s (see '%s --help')\n", msg, helpName(c))
}

// helpName is the command line that names c's command: "sbx", "sbx exec",
// "sbx profile show". (Command.Name alone gave "sbx sbx" for the app's own
// flags and "sbx show" for a subcommand's.)
func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return "sbx"
}

// versionLine is what `sbx --version` and `sbx version` print, and what
// doctor's report starts with. The Go release is given without the
// GOEXPERIMENT suffix ("go1.26.8-X:nogreenteagc"): the lean sbx is built
// with an experiment the full one it embeds is not (Makefile, SHORTEXP),
// and both are this one sbx, which says the same whichever answers
// (TestLeanBinaryLeavesServeOut). `go version -m` shows the build's
// settings.
func versionLine() string {
	return fmt.Sprintf("sbx version %s (commit %s, %s %s/%s)", version.Version(), version.Commit(), goRelease(runtime.Version()), runtime.GOOS, runtime.GOARCH)
}

// goRelease is runtime.Version without a GOEXPERIMENT suffix.
func goRelease(v string) string {
	r, _, _ := strings.Cut(v, " X:") // a devel toolchain's form
	r, _, _ = strings.Cut(r, "-X:")
	return r
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:            "version",
		Usage:           "print the version and commit of this sbx",
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, fmt.Errorf("unexpected argument %q", c.Args().First()), false)
			}
			fmt.Println(versionLine())
			return nil
		},
	}
}

// genDocsCommand is the hidden `sbx gen-docs`, in builds with urfave/cli's
// docs only (gendocs.go; `make docs`).
var genDocsCommand func() *cli.Command

func newApp(args []string) *cli.App { return newAppWith(args, deps{t0: nsjail.MonotonicNS()}) }

func newAppWith(args []string, d deps) *cli.App {
	// --version only: -v would read as --verbose to many.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and commit of this sbx"}
	cli.VersionPrinter = func(*cli.Context) { fmt.Println(versionLine()) }
	commands := []*cli.Command{
		execCommand(args, d),
		profileCommand(d.seccompRules),
		doctorCommand(),
		withOpsFlags(serveCommand()),
		imageCommand(),
		replCommand(),
		versionCommand(),
	}
	if genDocsCommand != nil {
		commands = append(commands, genDocsCommand())
	}
	return &cli.App{
		Name:    "sbx",
		Version: version.Version(),
		Usage:   "run untrusted code in a throwaway Linux sandbox",
		Description: "sbx runs a script or program in fresh user, mount, pid, net, ipc, uts and\n" +
			"cgroup namespaces, on a read-only root, with a tmpfs workspace that dies\n" +
			"with the run. No daemon, no root needed.",
		// run() prints errors and picks the exit code; cli's own handler
		// would call os.Exit and skip deferred cleanup.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    usageError,
		CommandNotFound: commandNotFound,
		Commands:        commands,
		Metadata:        map[string]any{},
	}
}

func execCommand(rawArgs []string, d deps) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a Python script, Python code, or a program in a sandbox",
		ArgsUsage: "FILE.py [ARGS...] | -c CODE [ARGS...] | -- CMD [ARGS...]",
		Description: "Examples:\n" +
			"   sbx exec task.py                       run a script (copied into /workspace)\n" +
			"   sbx exec --profile strict -c 'print(1)' run code given inline\n" +
			"   sbx exec --json task.py < input.txt     one JSON Result on stdout; stdin passes through\n" +
			"   sbx exec -- /usr/bin/python3 -V        any program of the sandbox's root\n" +
			"   sbx exec --file data.csv:in/data.csv task.py\n\n" +
			"Exit status: the payload's own; 128+N if signal N killed it; 124 on a time\n" +
			"limit; 137 on memory or another limit; 125 if sbx itself failed;\n" +
			"126/127 if the program cannot be run / was not found.",
		// A flag sbx cannot parse is a setup_error Result too, under
		// --json: an embedding caller always gets a Result to parse.
		OnUsageError: func(c *cli.Context, err error, sub bool) error {
			err = usageError(c, err, sub)
			if jsonRequested(rawArgs) {
				printJSON(nsjail.SetupFailure(newRunID(), c.String("profile"), err))
			}
			return err
		},
		// The flags that set profile keys (--memory, --timeout, ...) come
		// from the table profiles.Flags; see profile_cmd.go.
		Flags: cachedNames(append([]cli.Flag{
			&cli.StringFlag{Name: "profile", Aliases: []string{"p"}, Value: profiles.DefaultName, Usage: "built-in profile `NAME` (" + strings.Join(profiles.Names(), ", ") + ") or a profile file path"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON Result object on stdout instead of streaming the output"},
			&cli.StringFlag{Name: "c", Usage: "run Python `CODE` given on the command line"},
			&cli.StringSliceFlag{Name: "file", Usage: "copy host file `SRC[:DEST]` into the workspace (DEST relative to it; repeatable)"},
			&cli.StringSliceFlag{Name: "env", Usage: "set `KEY=VALUE` in the sandbox (repeatable); the host environment never enters"},
			&cli.BoolFlag{Name: "debug-timings", Usage: "print how long each step of the run took, on stderr"},
			&cli.StringFlag{Name: "output-dir", Usage: "copy the files the run created or changed in the workspace to `DIR` (regular files only; links are listed, never followed)"},
			&cli.BoolFlag{Name: "overwrite-output", Usage: "let --output-dir be a directory that is not empty: the run's files replace those of the same names, the others stay"},
			&cli.GenericFlag{Name: "input-dir", Value: &everyValue{}, Usage: "copy every regular file below `DIR` into the workspace, at the same relative paths (once)"},
			&cli.StringFlag{Name: "audit-log", Usage: "append one JSON line about the run to `FILE` (fsync'd); a run that cannot be logged fails"},
			&cli.BoolFlag{Name: "audit-output", Usage: "also log the payload's stdout and stderr in the audit line"},
			&cli.StringSliceFlag{Name: "resolve", Usage: "with --net allow, resolve `NAME:PORT:ADDR` to ADDR for this run, like curl's --resolve (repeatable); NAME must still be allowed"},
		}, profileFlags()...)),
		Action: func(c *cli.Context) error { return execAction(c, rawArgs, d) },
	}
}

// execAction is flags in, Result out: engine.Build makes the Config,
// engine.Run runs it, and the Result is printed or streamed.
func execAction(c *cli.Context, rawArgs []string, d deps) error {
	t0 := d.t0
	marks := []nsjail.Mark{{Name: "sbx: flags parsed", NS: nsjail.MonotonicNS()}}
	if ns := nsjail.ConstructorNS(); ns > 0 && ns <= t0 {
		// The timeline starts before main: what lies between is Go's
		// runtime start and the package inits ("process started (main)").
		marks = append(marks, nsjail.Mark{Name: "sbx: C constructors ran (after libc's start, before Go's runtime)", NS: ns})
	}
	id := newRunID()
	asJSON := c.Bool("json")
	bar := newProgressBar(c.String("image"), asJSON || jsonRequested(rawArgs))
	cfg, err := engine.Build(id, engine.Request{
		Profile:     c.String("profile"),
		Flags:       flagValues(c),
		Resolve:     c.StringSlice("resolve"),
		ResolveFlag: "--resolve",
		// An image pulled on first use draws its bar on a terminal,
		// never under --json.
		PullProgress: bar.progress(),
	})
	bar.done()
	defer cfg.Close()
	if needsFull(err) {
		// The lean sbx runs no image: the full sbx it embeds runs this
		// exec, from the same argv. Nothing has read stdin (a script
		// given as -), opened the audit log or written anything yet;
		// it returns only if the hand-off failed, and that is the
		// run's setup error.
		err = handOffError("exec on an image")
	}
	// The audit log opens next, before any error is acted on: every run
	// after this point is recorded, one that fails before its sandbox
	// exists included.
	var log *audit.Log
	var payload nsjail.Payload
	fail := func(err error) error {
		res := nsjail.SetupFailure(id, c.String("profile"), err)
		if log != nil {
			if lerr := engine.Audit(log, nil, res, payload, false, engine.Who{}); lerr != nil {
				res.Message += "; " + lerr.Error()
				err = fmt.Errorf("%w; %v", err, lerr)
			}
		}
		if asJSON || jsonRequested(rawArgs) {
			printJSON(res)
		}
		return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
	}
	if path := c.String("audit-log"); path != "" {
		var lerr error
		if log, lerr = audit.Open(path); lerr != nil {
			return fail(lerr)
		}
		defer log.Close()
	}
	if err != nil {
		return fail(err)
	}
	prof := cfg.Profile
	var warnings []string
	if dirs := c.Generic("input-dir").(*everyValue); len(*dirs) > 1 {
		return fail(fmt.Errorf("--input-dir given twice (%s): give one directory, and single files with --file", strings.Join(*dirs, ", ")))
	}
	var inputs []nsjail.File
	dir := c.Generic("input-dir").(*everyValue).String()
	if dir != "" {
		var skipped []string
		if inputs, skipped, err = nsjail.InputsFromDir(dir, int64(prof.Limits.WorkspaceSize)); err != nil {
			return fail(err)
		}
		warnings = append(warnings, skipped...)
	}
	rootfs := prof.Filesystem.Rootfs
	if rootfs == "" {
		rootfs = "/"
	}
	sc := &script{dir: dir, inputs: inputs, maxBytes: int64(prof.Limits.WorkspaceSize), rootfs: rootfs, imageArgv: cfg.ImageArgv()}
	payload, err = payloadFromArgs(c, rawArgs, sc)
	if sc.tmp != nil {
		defer sc.tmp.Close()
	}
	if err != nil {
		return fail(err)
	}
	warnings = append(warnings, sc.warnings...)
	cfg.Warnings = append(cfg.Warnings, warnings...)
	payload.Files = append(inputs, payload.Files...)
	if dir := c.String("output-dir"); dir != "" && !c.Bool("overwrite-output") {
		if err := checkOutputEmpty(dir); err != nil {
			return fail(err)
		}
	}
	env := c.StringSlice("env")
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fail(fmt.Errorf("--env %q: want KEY=VALUE", kv))
		}
	}
	marks = append(marks, nsjail.Mark{Name: "sbx: profile and payload ready", NS: nsjail.MonotonicNS()})
	// --env is the request's: it travels with the payload, not the Spec.
	payload.Env = env
	if err := checkExecSize(payload.Argv, cfg.Spec.Env, c.IsSet("c")); err != nil {
		return fail(err)
	}
	// What sbx found before the run (inputs skipped, a script that may
	// not be Python) is said now in terminal mode, and in the Result.
	if !asJSON {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(os.Stderr, "sbx: warning: "+w)
		}
	}
	// A script read from stdin used it up: the payload's is empty.
	var stdin io.Reader = os.Stdin
	if sc.usedStdin {
		stdin = nil
	}
	// From here on a signal is the run's: forwarded to the payload, or
	// the end of its report (internal/sigfwd).
	var sigs chan os.Signal
	if d.signals != nil {
		sigs = d.signals.Channel()
		marks = append(marks, signalsMark(d.signals, t0))
	} else {
		sigs = sigfwd.InLine()
	}
	defer stopForwarding(sigs)
	opts := engine.Options{Stdin: stdin, OutputDir: c.String("output-dir"), Signals: sigs,
		// One run, then sbx exits: its init may trade memory for page
		// faults as sbx itself did (internal/leanexec, HugeHeap).
		HugeHeapInit: leanexec.HugeHeap(os.Args, os.Getenv(leanexec.HugeHeapEnv))}
	if !asJSON {
		opts.Stdout, opts.Stderr = os.Stdout, os.Stderr
	}
	if c.Bool("debug-timings") {
		marks = append(marks, nsjail.Mark{Name: "sbx: spec built", NS: nsjail.MonotonicNS()})
		opts.Timings, opts.T0, opts.Marks = os.Stderr, t0, marks
	}
	res := engine.Run(context.Background(), cfg, payload, opts)
	outWarnings := outputWarnings(res.Files, c.String("output-dir"))
	res.Warnings = append(res.Warnings, outWarnings...)
	if log != nil {
		if err := engine.Audit(log, cfg, res, payload, c.Bool("audit-output"), engine.Who{}); err != nil {
			res.Status, res.ExitCode, res.Signal = nsjail.StatusSetupError, nsjail.ExitSbxFailed, nil
			res.Message = err.Error()
		}
	}
	if !asJSON && res.Status != nsjail.StatusSetupError {
		if line := res.DegradedSummary(); line != "" {
			fmt.Fprintln(os.Stderr, "sbx: warning: "+line)
		}
		for _, w := range outWarnings {
			fmt.Fprintln(os.Stderr, "sbx: warning: "+w)
		}
	}
	if asJSON {
		printJSON(res)
	} else if res.Status != nsjail.StatusOK && res.Status != nsjail.StatusExit && res.Status != nsjail.StatusSetupError {
		fmt.Fprintf(os.Stderr, "sbx: %s: %s\n", res.Status, res.Message)
	}
	if res.Status == nsjail.StatusSetupError {
		return cli.Exit(res.Message, nsjail.ExitSbxFailed)
	}
	if code := res.ProcessExitCode(); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// everyValue is a flag's value that keeps each time the flag was given,
// so that a flag that takes one value can refuse a second instead of
// letting the last silently win (issue 19, point 8). Unlike
// cli.StringSliceFlag it does not split on commas: a path may hold one.
type everyValue []string

func (v *everyValue) Set(s string) error {
	*v = append(*v, s)
	return nil
}

// String is the value given last ("" if none).
func (v *everyValue) String() string {
	if len(*v) == 0 {
		return ""
	}
	return (*v)[len(*v)-1]
}

// payloadFromArgs reads the three forms: FILE.py [ARGS], -c CODE [ARGS],
// and -- CMD [ARGS]. dir is --input-dir ("" if none) and inputs the files
// taken from it: a script inside it runs from its place there.
func payloadFromArgs(c *cli.Context, rawArgs []string, sc *script) (nsjail.Payload, error) {
	var p nsjail.Payload
	args := c.Args().Slice()
	for _, spec := range c.StringSlice("file") {
		f, err := parseFileFlag(spec)
		if err != nil {
			return p, err
		}
		p.Files = append(p.Files, f)
	}
	switch {
	case c.IsSet("c"):
		p.Argv = append([]string{"python3", "-c", c.String("c")}, args...)
	case len(args) == 0 && len(sc.imageArgv) > 0:
		// Only `sbx exec --image X` with nothing to run uses the
		// image's Entrypoint and Cmd.
		p.Argv = sc.imageArgv
	case len(args) == 0:
		return p, errors.New("nothing to run: give FILE.py, -c CODE, or -- CMD (see 'sbx exec --help')")
	case afterDoubleDash(rawArgs, len(args)):
		p.Argv = args
	default:
		var src, dest string
		var err error
		if isStdin(args[0]) || isPipe(args[0]) {
			src, err = sc.readPipedScript(args[0])
			dest = stdinScript
		} else {
			src, dest, err = locateScript(args[0], sc.dir)
		}
		if err != nil {
			return p, err
		}
		if !hasInput(sc.inputs, dest) {
			p.Files = append(p.Files, nsjail.File{Path: dest, Source: src, Mode: 0o644, Data: sc.tmp})
		}
		argv, err := sc.interpreter(src, dest)
		if err != nil {
			return p, err
		}
		p.Argv = append(argv, args[1:]...)
	}
	return p, nil
}

// locateScript finds the script arg names, and where it goes in the
// workspace: a script inside the input dir dir keeps its place there (so
// `sbx exec --input-dir . main.py` runs the project's main.py, next to
// its modules), and a relative arg that is not there from the current
// directory is looked up in dir ("--input-dir proj main.py"). Any other
// script goes to the workspace's top, under its own name.
func locateScript(arg, dir string) (src, dest string, err error) {
	src, err = filepath.EvalSymlinks(arg)
	if err != nil && dir != "" && !filepath.IsAbs(arg) {
		if s, derr := filepath.EvalSymlinks(filepath.Join(dir, arg)); derr == nil {
			src, err = s, nil
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("script %s: %w", arg, unwrapPath(err))
	}
	fi, err := os.Stat(src)
	if err != nil {
		return "", "", fmt.Errorf("script %s: %w", src, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("script %s: not a regular file", src)
	}
	if src, err = filepath.Abs(src); err != nil {
		return "", "", fmt.Errorf("script %s: %w", arg, err)
	}
	if dir != "" {
		if root, err := filepath.EvalSymlinks(dir); err == nil {
			if root, err = filepath.Abs(root); err == nil {
				if rel, err := filepath.Rel(root, src); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
					return src, filepath.ToSlash(rel), nil
				}
			}
		}
	}
	return src, filepath.Base(src), nil
}

// hasInput tells whether path is among the inputs.
func hasInput(inputs []nsjail.File, path string) bool {
	for _, f := range inputs {
		if f.Path == path {
			return true
		}
	}
	return false
}

// jsonRequested tells whether --json is among sbx's own arguments (those
// before a "--"), wherever it stands: a run that fails before its flags
// are all parsed, or whose script name came first (`sbx exec x.py
// --json`), still answers with a Result. A successful run goes by the
// parsed flag only, since arguments after the script are the script's.
func jsonRequested(rawArgs []string) bool {
	for _, a := range rawArgs {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		if !hasVal {
			return true
		}
		if b, err := strconv.ParseBool(val); err == nil {
			return b
		}
	}
	return false
}

// afterDoubleDash tells whether the n positional arguments at the end of
// rawArgs were introduced by "--" (the flag parser swallows it).
func afterDoubleDash(rawArgs []string, n int) bool {
	i := len(rawArgs) - n - 1
	return i >= 0 && rawArgs[i] == "--"
}

func parseFileFlag(spec string) (nsjail.File, error) {
	src, dest, hasDest := strings.Cut(spec, ":")
	if src == "" {
		return nsjail.File{}, fmt.Errorf("--file %q: want SRC[:DEST]", spec)
	}
	if !hasDest || dest == "" {
		dest = filepath.Base(src)
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nsjail.File{}, fmt.Errorf("--file %s: %w", src, unwrapPath(err))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nsjail.File{}, fmt.Errorf("--file %s: %w", src, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nsjail.File{}, fmt.Errorf("--file %s: not a regular file", src)
	}
	clean := filepath.Clean(dest)
	if filepath.IsAbs(dest) || clean != dest || strings.HasPrefix(clean, "..") {
		return nsjail.File{}, fmt.Errorf("--file %s: destination %q must be a clean relative path inside the workspace", src, dest)
	}
	return nsjail.File{Path: dest, Source: real, Mode: uint32(fi.Mode().Perm())}, nil
}

// unwrapPath is oserr.WithoutPath: the error without the path that the
// message already names.
func unwrapPath(err error) error { return oserr.WithoutPath(err) }

func newRunID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// printJSON prints v indented. HTML escaping is off: it turned each & < >
// of a payload's strings into six bytes (\u0026) for no reader's benefit
// (issue 11, finding 1).
func printJSON(v any) {
	if res, ok := v.(*nsjail.Result); ok {
		writeResult(os.Stdout, res) // byte for byte the same, faster (output.go)
		return
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
