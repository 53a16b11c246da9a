package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// profileCommand is `sbx profile`; seccompRules is deps.seccompRules.
func profileCommand(seccompRules func(policy string) ([]string, error)) *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "list, show and check profiles",
		Description: "A profile is a TOML file saying what a sandbox may do: limits, filesystem,\n" +
			"network, seccomp policy, environment. Built-ins are named (sbx profile list);\n" +
			"a user's file is a path (with a slash or a .toml suffix) and may extend a\n" +
			"built-in with extends = \"strict\". See docs/profiles.md for every key.",
		OnUsageError: usageError,
		Subcommands: []*cli.Command{
			{
				Name:   "list",
				Usage:  "list the built-in profiles",
				Action: profileList,
			},
			{
				Name:      "show",
				Usage:     "print the effective profile: every value and where it came from",
				ArgsUsage: "[NAME|FILE]",
				Description: "Prints the profile (default: " + profiles.DefaultName + ") after extends and flags are applied, as TOML, each value\n" +
					"with a comment naming its source: a file and line, a flag, or \"default\".\n" +
					"The exec flags (--memory, --timeout, ...) may be given to see their effect.\n" +
					"A profile that turns a security layer off gets a WARNING line on stderr.",
				OnUsageError: usageError,
				Flags: append([]cli.Flag{
					&cli.BoolFlag{Name: "json", Usage: "print one JSON object: values with sources, warnings, seccomp"},
				}, profileFlags()...),
				Action: func(c *cli.Context) error { return profileShow(c, seccompRules) },
			},
			{
				Name:      "validate",
				Usage:     "check profile files: prints ok, or every error (exit 125)",
				ArgsUsage: "FILE...",
				Description: "Checks syntax, keys, types, units and ranges of each file and of what it\n" +
					"extends, without touching the host (paths are checked by sbx exec).",
				OnUsageError: usageError,
				Action:       profileValidate,
			},
		},
	}
}

// profileFlags are the flags of profiles.Flags, as urfave/cli flags.
// They have no Value, so that IsSet says whether the user gave them and
// the profile's value stands otherwise.
func profileFlags() []cli.Flag {
	out := make([]cli.Flag, 0, len(profiles.Flags))
	for _, f := range profiles.Flags {
		names := []string{f.Name}
		if f.IsList() {
			out = append(out, namedSliceFlag{&cli.StringSliceFlag{Name: f.Name, Usage: f.Usage, Category: f.Category, DefaultText: f.DefaultText()}, names})
		} else {
			out = append(out, namedStringFlag{&cli.StringFlag{Name: f.Name, Usage: f.Usage, Category: f.Category, DefaultText: f.DefaultText()}, names})
		}
	}
	return out
}

// namedStringFlag and namedSliceFlag are the profile flags with their
// Names() computed once. urfave/cli v2 runs every flag's action check on
// every command (runFlagActions: IsSet of each flag, which scans every
// flag's Names()), and each Names() call runs a regexp (FlagNames): with
// ~45 flags on exec that was ~1000 regexp calls, ~0.3–0.5 ms of CPU per
// sbx exec (perf, issue 13). Everything else is the embedded flag's.
type namedStringFlag struct {
	*cli.StringFlag
	names []string
}

func (f namedStringFlag) Names() []string { return f.names }

type namedSliceFlag struct {
	*cli.StringSliceFlag
	names []string
}

func (f namedSliceFlag) Names() []string { return f.names }

type namedBoolFlag struct {
	*cli.BoolFlag
	names []string
}

func (f namedBoolFlag) Names() []string { return f.names }

type namedGenericFlag struct {
	*cli.GenericFlag
	names []string
}

func (f namedGenericFlag) Names() []string { return f.names }

// cachedNames gives every flag of fs of these four types its Names()
// computed once, as profileFlags does (the others, and those already
// wrapped, stay as they are). Help is unchanged: it prints through the
// embedded flag's own String.
func cachedNames(fs []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(fs))
	for i, f := range fs {
		switch f := f.(type) {
		case *cli.StringFlag:
			out[i] = namedStringFlag{f, f.Names()}
		case *cli.StringSliceFlag:
			out[i] = namedSliceFlag{f, f.Names()}
		case *cli.BoolFlag:
			out[i] = namedBoolFlag{f, f.Names()}
		case *cli.GenericFlag:
			out[i] = namedGenericFlag{f, f.Names()}
		default:
			out[i] = f
		}
	}
	return out
}

// applyFlags lays the profile flags that were given over the profile
// (flags win) and validates the result.
func applyFlags(c *cli.Context, p *profiles.Profile) error {
	return p.ApplyFlags(flagValues(c))
}

// flagValues reads a flag from the first of ctxs that has it set.
//
// Each context's set flags are listed once (FlagNames: the flag set's
// Visit, linear) and only a listed name is asked IsSet. IsSet of a flag
// that is not set scans every flag of the command, and each flag's Names()
// runs a regexp (urfave/cli v2's FlagNames): asked for each of the ~30
// profile flags, that was ~1000 regexp calls, a third of a millisecond
// of CPU in every sbx exec (perf, issue 13).
func flagValues(ctxs ...*cli.Context) func(name string) ([]string, bool) {
	set := make([]map[string]bool, len(ctxs))
	for i, c := range ctxs {
		set[i] = map[string]bool{}
		for _, n := range c.FlagNames() {
			set[i][n] = true
		}
	}
	return func(name string) ([]string, bool) {
		for i, c := range ctxs {
			if !set[i][name] || !c.IsSet(name) {
				continue
			}
			if vals := c.StringSlice(name); vals != nil {
				return vals, true
			}
			return []string{c.String(name)}, true
		}
		return nil, false
	}
}

// trailingFlags parses the flags given after the positional argument
// ("sbx profile show strict --json"): urfave/cli v2 stops parsing flags at
// the first argument and leaves the rest as arguments.
func trailingFlags(c *cli.Context, args []string) (*cli.Context, error) {
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(set); err != nil {
			return nil, err
		}
	}
	if err := set.Parse(args); err != nil {
		return nil, err
	}
	if set.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", set.Arg(0))
	}
	return cli.NewContext(c.App, set, c), nil
}

func profileList(c *cli.Context) error {
	for _, n := range profiles.Names() {
		p, err := profiles.Load(n)
		if err != nil {
			return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
		}
		fmt.Printf("%-10s %s\n", n, p.Description)
	}
	return nil
}

// showJSON is `sbx profile show --json`.
type showJSON struct {
	Profile string `json:"profile"`
	// Chain is the profile and what it extends, the profile first.
	Chain  []string                    `json:"chain"`
	Values map[string]profiles.Setting `json:"values"`
	// Warnings are the layers the profile turns off; empty when none.
	Warnings []string `json:"warnings"`
	Seccomp  struct {
		Policy string `json:"policy"`
		// Rules is absent while the seccomp integration has not set
		// the seccompRules hook.
		Rules []string `json:"rules,omitempty"`
	} `json:"seccomp"`
}

func profileShow(c *cli.Context, seccompRules func(policy string) ([]string, error)) error {
	// With no name, the profile `sbx exec` uses by default.
	name := profiles.DefaultName
	if c.NArg() > 0 {
		name = c.Args().First()
	}
	after, err := trailingFlags(c, c.Args().Tail())
	if err != nil {
		return profileUsage(c, explainFlagError(err, c.Command.Flags))
	}
	p, err := profiles.Load(name)
	if err == nil {
		err = p.ApplyFlags(flagValues(after, c))
	}
	if err != nil {
		return printErrors(err)
	}
	warnings := p.Warnings()
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "sbx: WARNING: "+w)
	}
	var rules []string
	if seccompRules != nil {
		if rules, err = seccompRules(p.Seccomp.Policy); err != nil {
			return cli.Exit(fmt.Sprintf("seccomp policy %q: %v", p.Seccomp.Policy, err), nsjail.ExitSbxFailed)
		}
	}
	if c.Bool("json") || after.Bool("json") {
		out := showJSON{Profile: p.Name, Chain: p.Chain(), Values: map[string]profiles.Setting{}, Warnings: warnings}
		if out.Warnings == nil {
			out.Warnings = []string{}
		}
		for _, s := range p.Settings() {
			out.Values[s.Key] = s
		}
		out.Seccomp.Policy, out.Seccomp.Rules = p.Seccomp.Policy, rules
		printJSON(out)
		return nil
	}
	writeProfile(os.Stdout, p, rules)
	return nil
}

// writeProfile prints the effective profile as a TOML file whose comments
// say where each value came from; saved, it loads as the same profile.
func writeProfile(w io.Writer, p *profiles.Profile, rules []string) {
	chain := ""
	if len(p.Chain()) > 1 {
		chain = ": " + strings.Join(p.Chain(), " extends ")
	}
	fmt.Fprintf(w, "# effective profile %s%s\n", p.Name, chain)
	fmt.Fprintf(w, "# each value with its source: FILE:LINE, a flag, or the built-in default\n")
	settings := p.Settings()
	width := 0
	for _, s := range settings {
		width = max(width, len(s.Key))
	}
	vals := make([]string, len(settings))
	vwidth := 0
	for i, s := range settings {
		vals[i] = profiles.FormatValue(s.Value)
		if len(vals[i]) <= 40 {
			vwidth = max(vwidth, len(vals[i]))
		}
	}
	for i, s := range settings {
		fmt.Fprintf(w, "%-*s = %-*s # %s\n", width, s.Key, vwidth, vals[i], s.Origin)
		if s.Key == "seccomp.policy" {
			for _, r := range rules {
				fmt.Fprintf(w, "#   %s\n", r)
			}
		}
	}
}

func profileValidate(c *cli.Context) error {
	if c.NArg() == 0 {
		return profileUsage(c, "want one or more profile files")
	}
	failed := false
	for _, ref := range c.Args().Slice() {
		p, err := profiles.Load(ref)
		if err != nil {
			printErrors(err)
			failed = true
			continue
		}
		for _, w := range p.Warnings() {
			fmt.Fprintln(os.Stderr, "sbx: WARNING: "+w)
		}
		if c.NArg() > 1 {
			fmt.Printf("%s: ok\n", ref)
		} else {
			fmt.Println("ok")
		}
	}
	if failed {
		return cli.Exit("", nsjail.ExitSbxFailed)
	}
	return nil
}

func profileUsage(c *cli.Context, msg string) error {
	return cli.Exit(fmt.Sprintf("%s (see 'sbx profile %s --help')", msg, c.Command.Name), nsjail.ExitSbxFailed)
}

// printErrors prints every problem of a profile on its own line and
// returns the exit-125 error (with no message: it is printed).
func printErrors(err error) error {
	var errs profiles.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "sbx: "+e.Error())
		}
	} else {
		fmt.Fprintln(os.Stderr, "sbx: "+err.Error())
	}
	return cli.Exit("", nsjail.ExitSbxFailed)
}
