package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/netproxy"
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
			"interrupts a running cell (KeyboardInterrupt, state kept), or drops the lines\n" +
			"typed at the prompt; Ctrl-D ends the session and destroys the sandbox. At a\n" +
			"terminal, lines are edited as in python3 (arrows, Ctrl-A/E/K/U/W) and Up and\n" +
			"Down walk the lines entered before; from a pipe, plain lines, no prompt.\n\n" +
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
	if needsFull(err) {
		// A profile on an image: the full sbx runs the session, before
		// anything here has read stdin (handoff.go).
		return handOffNow("repl on an image")
	}
	if err != nil {
		return fail(err)
	}
	// Deferred first, so it runs after ss.Close: the Config holds the
	// image's lock for as long as the sandbox runs on it.
	defer cfg.Close()
	for _, w := range cfg.Warnings {
		fmt.Fprintln(os.Stderr, "sbx: warning:", w)
	}
	job := cfg.Job(nsjail.Payload{}, engine.Options{})
	job.Timeout = 0 // the session lasts while its person is there
	// With network mode "allow", the session's own egress proxy: each
	// cell's refused attempts are shown after it (showExecution).
	ss, proxy, err := engine.StartSession(c.Context, cfg, job)
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
	var in lineReader = newPlainLines(os.Stdin)
	if isTerminal(os.Stdin) && isTerminal(os.Stdout) {
		tl, err := newTermLines(os.Stdin, os.Stdout)
		if err != nil {
			return fail(err)
		}
		defer tl.restore()
		in = tl
	}
	err = runREPL(c.Context, ss, proxy, in, os.Stdout, os.Stderr)
	if tl, ok := in.(*termLines); ok {
		tl.restore()
		fmt.Fprintln(os.Stdout)
	}
	return err
}

// lineReader gives the repl its lines: a line-edited terminal
// (termLines) or plain lines (plainLines, when stdin is a pipe or a file,
// as tests give it).
type lineReader interface {
	// ReadLine returns the next line, without its newline, after
	// showing prompt; io.EOF at the end (Ctrl-D), errInterrupted for a
	// Ctrl-C at the prompt.
	ReadLine(prompt string) (string, error)
	// Run runs a cell with the terminal as the cell's: cooked, so that
	// Ctrl-C is SIGINT again (Session.Interrupt) and output's newlines
	// are the terminal's.
	Run(func() error) error
}

// errInterrupted: Ctrl-C at the prompt, which drops the lines typed so
// far, as python3's prompt does.
var errInterrupted = errors.New("interrupted")

// runREPL reads cells from in until EOF or the session's end; proxy is
// the session's egress proxy, nil with the network off.
func runREPL(ctx context.Context, ss *nsjail.Session, proxy *netproxy.Proxy, in lineReader, stdout, stderr io.Writer) error {
	var block []string
	for {
		prompt := ">>> "
		if len(block) > 0 {
			prompt = "... "
		}
		line, err := in.ReadLine(prompt)
		if errors.Is(err, errInterrupted) {
			fmt.Fprintln(stderr, "KeyboardInterrupt")
			block = nil
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return cli.Exit("sbx repl: read the terminal: "+err.Error(), nsjail.ExitSbxFailed)
		}
		if len(block) == 0 && strings.TrimSpace(line) == "" {
			continue
		}
		block = append(block, line)
		// A block goes on after a line ending in ':' or '\\', or with
		// brackets open, until an empty line.
		if opensBlock(block) && strings.TrimSpace(line) != "" {
			continue
		}
		code := strings.Join(block, "\n")
		block = nil
		var ex *nsjail.Execution
		err = in.Run(func() error {
			var err error
			ex, err = ss.Run(ctx, nsjail.Cell{Code: code, OnOutput: func(stream string, data []byte) {
				if stream == "stderr" {
					stderr.Write(data)
				} else {
					stdout.Write(data)
				}
			}})
			if err == nil {
				ex.Egress = engine.CellEgress(proxy)
				showExecution(ex, stdout, stderr)
			}
			return err
		})
		if err != nil {
			return cli.Exit("sbx repl: "+err.Error(), nsjail.ExitSbxFailed)
		}
		if ex.Status == nsjail.ExecSessionEnded {
			return cli.Exit("sbx repl: "+ex.Message, nsjail.ExitSbxFailed)
		}
	}
}

// plainLines reads lines from a pipe or a file, with no prompt.
type plainLines struct{ sc *bufio.Scanner }

func newPlainLines(in io.Reader) *plainLines {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	return &plainLines{sc}
}

func (p *plainLines) ReadLine(string) (string, error) {
	if p.sc.Scan() {
		return p.sc.Text(), nil
	}
	if err := p.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (p *plainLines) Run(f func() error) error { return f() }

// termLines is a terminal in raw mode at the prompt, read by
// golang.org/x/term's Terminal: line editing (arrows, Home/End, Ctrl-A,
// Ctrl-E, Ctrl-K, Ctrl-U, Ctrl-W) and an in-memory history (Up and Down),
// as python3's readline prompt has. The terminal is restored while a cell
// runs and when the repl ends.
type termLines struct {
	fd    int
	out   io.Writer
	saved *term.State
	raw   bool
	keys  *ctrlCWatch
	t     *term.Terminal
}

// ctrlCWatch passes the terminal's bytes through and notes a Ctrl-C
// (ETX): term.Terminal returns io.EOF for it as for Ctrl-D.
type ctrlCWatch struct {
	r   io.Reader
	etx bool
}

func (w *ctrlCWatch) Read(b []byte) (int, error) {
	n, err := w.r.Read(b)
	if bytes.IndexByte(b[:n], 0x03) >= 0 {
		w.etx = true
	}
	return n, err
}

func newTermLines(in, out *os.File) (*termLines, error) {
	fd := int(in.Fd())
	saved, err := term.GetState(fd)
	if err != nil {
		return nil, fmt.Errorf("tcgetattr %s: %w", in.Name(), err)
	}
	tl := &termLines{fd: fd, out: out, saved: saved, keys: &ctrlCWatch{r: in}}
	tl.newTerminal()
	return tl, nil
}

// newTerminal starts a term.Terminal on the repl's terminal, with the
// history of the one before: after a Ctrl-C, which leaves the old one's
// cursor mid-line (it would not draw its next prompt).
func (tl *termLines) newTerminal() {
	old := tl.t
	tl.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{tl.keys, tl.out}, "")
	if old != nil {
		tl.t.History = old.History
	}
}

func (tl *termLines) ReadLine(prompt string) (string, error) {
	if !tl.raw {
		// term.MakeRaw: tcsetattr(3) with cfmakeraw's flags.
		if _, err := term.MakeRaw(tl.fd); err != nil {
			return "", fmt.Errorf("tcsetattr (raw): %w", err)
		}
		tl.raw = true
	}
	if w, _, err := term.GetSize(tl.fd); err == nil && w > 0 {
		tl.t.SetSize(w, 0)
	}
	tl.t.SetPrompt(prompt)
	tl.keys.etx = false
	line, err := tl.t.ReadLine()
	if errors.Is(err, io.EOF) && tl.keys.etx {
		// Cooked again for what the repl prints, after the ^C line.
		tl.restore()
		tl.out.Write([]byte("\n"))
		tl.newTerminal()
		return "", errInterrupted
	}
	return line, err
}

func (tl *termLines) Run(f func() error) error {
	tl.restore()
	return f()
}

// restore puts the terminal back as the repl found it.
func (tl *termLines) restore() {
	if tl.raw {
		term.Restore(tl.fd, tl.saved)
		tl.raw = false
	}
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
	if eg := ex.Egress; eg != nil {
		// The refusals only: a person at the prompt wonders why a fetch
		// failed, not what succeeded.
		for _, a := range eg.Attempts {
			if !a.Allowed {
				fmt.Fprintf(stderr, "[sbx: egress refused: %s: %s]\n", net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), a.Reason)
			}
		}
		if eg.Truncated {
			fmt.Fprintf(stderr, "[sbx: %d egress attempts of the cell were not listed]\n", eg.Summary.Attempts-eg.Summary.Recorded)
		}
	}
}
