package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// sbx repl: a person's prompt on a live session (nsjail.StartSession),
// run here without a server.
func replCommand() *cli.Command {
	return &cli.Command{
		Name:  "repl",
		Usage: "a Python prompt on a live session in a sandbox: state kept across lines, as in python3",
		Description: "Starts one session sandbox (the profile's limits hold for its life: memory,\n" +
			"pids, total CPU, workspace) and reads Python from the terminal: a line, or a\n" +
			"block ending with an empty line. Each runs as a cell of the session: its output\n" +
			"as it comes, then the value of its last expression, or its traceback. Ctrl-C\n" +
			"interrupts a running cell (KeyboardInterrupt, state kept); Ctrl-D ends the\n" +
			"session and destroys the sandbox. The terminal's own line editing applies.\n\n" +
			"Examples:\n" +
			"   sbx repl\n" +
			"   sbx repl --profile data",
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Aliases: []string{"p"}, Value: profiles.DefaultName, Usage: "the profile `NAME|FILE` of the session"},
		},
		Action: replAction,
	}
}

func replAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError(c, fmt.Errorf("unexpected argument %q", c.Args().First()), false)
	}
	fail := func(err error) error { return cli.Exit("sbx repl: "+err.Error(), nsjail.ExitSbxFailed) }
	cfg, err := engine.Build(newRunID(), engine.Request{Profile: c.String("profile")})
	if err != nil {
		return fail(err)
	}
	// Deferred first, so it runs after ss.Close: the Config holds the
	// image's lock for as long as the sandbox runs on it.
	defer cfg.Close()
	if cfg.Proxy != nil {
		return fail(fmt.Errorf("profile %s: sessions do not support network mode %q yet", cfg.Profile.Name, "allow"))
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(os.Stderr, "sbx: warning:", w)
	}
	job := cfg.Job(nsjail.Payload{}, engine.Options{})
	job.Timeout = 0 // the session lasts while its person is there
	ss, err := nsjail.StartSession(c.Context, job)
	if err != nil {
		return fail(err)
	}
	defer ss.Close()
	ints := make(chan os.Signal, 4)
	signal.Notify(ints, syscall.SIGINT)
	defer signal.Stop(ints)
	go func() {
		for range ints {
			ss.Interrupt()
		}
	}()
	return runREPL(c.Context, ss, os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stdin))
}

// runREPL reads cells from in until EOF or the session's end.
func runREPL(ctx context.Context, ss *nsjail.Session, in io.Reader, stdout, stderr io.Writer, prompt bool) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	var block []string
	ask := func() {
		if prompt {
			if len(block) == 0 {
				fmt.Fprint(stdout, ">>> ")
			} else {
				fmt.Fprint(stdout, "... ")
			}
		}
	}
	ask()
	for sc.Scan() {
		line := sc.Text()
		if len(block) == 0 && strings.TrimSpace(line) == "" {
			ask()
			continue
		}
		block = append(block, line)
		// A block goes on after a line ending in ':' or '\\', or with
		// brackets open, until an empty line.
		if opensBlock(block) && strings.TrimSpace(line) != "" {
			ask()
			continue
		}
		code := strings.Join(block, "\n")
		block = nil
		ex, err := ss.Run(ctx, nsjail.Cell{Code: code, OnOutput: func(stream string, data []byte) {
			if stream == "stderr" {
				stderr.Write(data)
			} else {
				stdout.Write(data)
			}
		}})
		if err != nil {
			return cli.Exit("sbx repl: "+err.Error(), nsjail.ExitSbxFailed)
		}
		showExecution(ex, stdout, stderr)
		if ex.Status == nsjail.ExecSessionEnded {
			return cli.Exit("sbx repl: "+ex.Message, nsjail.ExitSbxFailed)
		}
		ask()
	}
	if prompt {
		fmt.Fprintln(stdout)
	}
	return nil
}

// opensBlock reports whether the lines so far want more: a compound
// statement's header, a continued line, or open brackets.
func opensBlock(lines []string) bool {
	first := strings.TrimRight(lines[0], " \t")
	last := strings.TrimRight(lines[len(lines)-1], " \t")
	if strings.HasSuffix(first, ":") || strings.HasSuffix(last, "\\") || strings.HasPrefix(first, "@") {
		return true
	}
	depth := 0
	for _, l := range lines {
		for _, r := range l {
			switch r {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
		}
	}
	return depth > 0
}

// showExecution prints what a cell gave besides its output, as python3's
// prompt does: the values, then the traceback.
func showExecution(ex *nsjail.Execution, stdout, stderr io.Writer) {
	for _, r := range ex.Results {
		switch {
		case r.PNG != "":
			fmt.Fprintf(stdout, "[figure: %s, PNG of %d bytes in base64]\n", r.Text, len(r.PNG))
		case r.Text != "":
			fmt.Fprintln(stdout, r.Text)
		}
	}
	if e := ex.Error; e != nil {
		fmt.Fprintln(stderr, "Traceback (most recent call last):")
		for _, f := range e.Traceback {
			fmt.Fprintf(stderr, "  File \"%s\", line %d, in %s\n", f.File, f.Line, f.Function)
			if f.Code != "" {
				fmt.Fprintf(stderr, "    %s\n", f.Code)
			}
		}
		if e.Value != "" {
			fmt.Fprintf(stderr, "%s: %s\n", e.Name, e.Value)
		} else {
			fmt.Fprintln(stderr, e.Name)
		}
	}
	if ex.Status != nsjail.ExecOK && ex.Status != nsjail.ExecError && ex.Message != "" {
		fmt.Fprintf(stderr, "[sbx: %s]\n", ex.Message)
	}
	if ex.StdoutTruncated || ex.StderrTruncated {
		fmt.Fprintf(stderr, "[sbx: output past %d bytes a stream was not shown]\n", nsjail.SessionOutputLimit)
	}
}
