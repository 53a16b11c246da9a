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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/internal/units"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// t0 is when sbx started, for --debug-timings.
var t0 int64

func main() {
	// The re-executed init must not see the CLI at all.
	if nsjail.IsInit() {
		nsjail.Init()
	}
	t0 = nsjail.MonotonicNS()
	os.Exit(run(os.Args))
}

func run(args []string) int {
	app := newApp(args)
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
	return exitCode
}

// exitCode is what the exec action decided; cli.Exit is kept for errors.
var exitCode int

func usageError(c *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see 'sbx %s --help')", err, c.Command.Name), nsjail.ExitSbxFailed)
}

func newApp(args []string) *cli.App {
	return &cli.App{
		Name:  "sbx",
		Usage: "run untrusted code in a throwaway Linux sandbox",
		Description: "sbx runs a script or program in fresh user, mount, pid, net, ipc, uts and\n" +
			"cgroup namespaces, on a read-only root, with a tmpfs workspace that dies\n" +
			"with the run. No daemon, no root needed.",
		HideVersion: true,
		// run() prints errors and picks the exit code; cli's own handler
		// would call os.Exit and skip deferred cleanup.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		CommandNotFound: func(c *cli.Context, name string) {
			exitCode = nsjail.ExitSbxFailed
			fmt.Fprintf(os.Stderr, "sbx: unknown command %q (see 'sbx --help')\n", name)
		},
		Commands: []*cli.Command{
			execCommand(args),
			profileCommand(),
		},
	}
}

func execCommand(rawArgs []string) *cli.Command {
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
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Aliases: []string{"p"}, Value: profiles.DefaultName, Usage: "built-in profile `NAME` (" + strings.Join(profiles.Names(), ", ") + ") or a profile file path"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON Result object on stdout instead of streaming the output"},
			&cli.StringFlag{Name: "c", Usage: "run Python `CODE` given on the command line"},
			&cli.StringSliceFlag{Name: "file", Usage: "copy host file `SRC[:DEST]` into the workspace (DEST relative to it; repeatable)"},
			&cli.StringSliceFlag{Name: "env", Usage: "set `KEY=VALUE` in the sandbox (repeatable); the host environment never enters"},
			&cli.StringFlag{Name: "rootfs", Usage: "use directory `DIR` as the read-only root instead of the host's /usr"},
			&cli.StringFlag{Name: "timeout", Usage: "wall-clock limit, e.g. `1.5s` or 2m (default: the profile's)"},
			&cli.BoolFlag{Name: "debug-timings", Usage: "print how long each step of the run took, on stderr"},
			&cli.StringFlag{Name: "output-dir", Usage: "copy the files the run created or changed in the workspace to `DIR` (regular files only; links are listed, never followed)"},
			&cli.StringFlag{Name: "output-limit", Usage: "bytes of each of stdout and stderr to keep, e.g. `1M` (default: the profile's)"},
		},
		Action: func(c *cli.Context) error { return execAction(c, rawArgs) },
	}
}

// execAction turns flags into a Job, runs it, and reports.
func execAction(c *cli.Context, rawArgs []string) error {
	id := newRunID()
	asJSON := c.Bool("json")
	fail := func(err error) error {
		if asJSON {
			printJSON(nsjail.SetupFailure(id, c.String("profile"), err))
		}
		return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
	}
	prof, err := profiles.Load(c.String("profile"))
	if err != nil {
		return fail(err)
	}
	if err := applyFlags(c, prof); err != nil {
		return fail(err)
	}
	payload, err := payloadFromArgs(c, rawArgs)
	if err != nil {
		return fail(err)
	}
	env := c.StringSlice("env")
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fail(fmt.Errorf("--env %q: want KEY=VALUE", kv))
		}
	}
	spec, err := prof.Spec(id, env)
	if err != nil {
		return fail(err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	job := &nsjail.Job{
		Spec:        spec,
		Payload:     payload,
		Stdin:       os.Stdin,
		OutputLimit: int64(prof.Limits.Output),
		Timeout:     time.Duration(prof.Limits.WallTime),
		OutputDir:   c.String("output-dir"),
		Signals:     sigs,
	}
	if !asJSON {
		job.Stdout, job.Stderr = os.Stdout, os.Stderr
	}
	if c.Bool("debug-timings") {
		job.Timings, job.T0 = os.Stderr, t0
	}
	res := nsjail.Run(context.Background(), job)
	if asJSON {
		printJSON(res)
	} else if res.Status != nsjail.StatusOK && res.Status != nsjail.StatusExit && res.Status != nsjail.StatusSetupError {
		fmt.Fprintf(os.Stderr, "sbx: %s: %s\n", res.Status, res.Message)
	} else if res.ExitCode == nsjail.ExitNotFound || res.ExitCode == nsjail.ExitCannotExec {
		fmt.Fprintf(os.Stderr, "sbx: %s\n", res.Message)
	}
	if res.Status == nsjail.StatusSetupError {
		return cli.Exit(res.Message, nsjail.ExitSbxFailed)
	}
	exitCode = res.ProcessExitCode()
	return nil
}

// applyFlags lays the flags over the profile (flags win).
func applyFlags(c *cli.Context, p *profiles.Profile) error {
	if c.IsSet("rootfs") {
		dir, err := filepath.Abs(c.String("rootfs"))
		if err != nil {
			return fmt.Errorf("--rootfs: %w", err)
		}
		p.Filesystem.Rootfs = dir
	}
	if c.IsSet("timeout") {
		d, err := units.ParseDuration(c.String("timeout"))
		if err != nil {
			return fmt.Errorf("--timeout: %w", err)
		}
		p.Limits.WallTime = units.Duration(d)
	}
	if c.IsSet("output-limit") {
		n, err := units.ParseSize(c.String("output-limit"))
		if err != nil {
			return fmt.Errorf("--output-limit: %w", err)
		}
		p.Limits.Output = units.Size(n)
	}
	return p.Validate()
}

// payloadFromArgs reads the three forms: FILE.py [ARGS], -c CODE [ARGS],
// and -- CMD [ARGS].
func payloadFromArgs(c *cli.Context, rawArgs []string) (nsjail.Payload, error) {
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
	case len(args) == 0:
		return p, errors.New("nothing to run: give FILE.py, -c CODE, or -- CMD (see 'sbx exec --help')")
	case afterDoubleDash(rawArgs, len(args)):
		p.Argv = args
	default:
		script := args[0]
		fi, err := os.Stat(script)
		if err != nil {
			return p, fmt.Errorf("script %s: %w", script, unwrapPath(err))
		}
		if !fi.Mode().IsRegular() {
			return p, fmt.Errorf("script %s: not a regular file", script)
		}
		dest := filepath.Base(script)
		p.Files = append(p.Files, nsjail.File{Path: dest, Source: script, Mode: 0o644})
		p.Argv = append([]string{"python3", dest}, args[1:]...)
	}
	return p, nil
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
	fi, err := os.Stat(src)
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
	return nsjail.File{Path: dest, Source: src, Mode: uint32(fi.Mode().Perm())}, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func newRunID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "list and show profiles",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the built-in profiles",
				Action: func(c *cli.Context) error {
					for _, n := range profiles.Names() {
						p, err := profiles.Load(n)
						if err != nil {
							return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
						}
						fmt.Printf("%-10s %s\n", n, p.Description)
					}
					return nil
				},
			},
		},
	}
}
