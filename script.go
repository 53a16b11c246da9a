package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/units"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// stdinScript is the workspace name of a script read from stdin
// (`sbx exec -`).
const stdinScript = "stdin.py"

// script is what payloadFromArgs is told about the run, and what it
// found out about the script besides the Payload.
type script struct {
	// In: --input-dir ("" if none) and the files taken from it; the most
	// a script read from a pipe may hold; the sandbox's root on the host
	// ("/" for the host's own), where a #! line's interpreter must be.
	dir      string
	inputs   []nsjail.File
	maxBytes int64
	rootfs   string
	// imageArgv is the image's Entrypoint and Cmd, run when nothing
	// else is given.
	imageArgv []string
	// Out: the script was sbx's own stdin (the payload's is empty then);
	// tmp is the host copy of a piped script, unlinked from the moment it
	// was made (readPipedScript), to close after the run.
	usedStdin bool
	tmp       *os.File
	warnings  []string
}

// isStdin tells whether arg names sbx's stdin: "-", or /dev/stdin and
// its aliases, which a pipe cannot resolve to a path (they read as
// "pipe:[N]").
func isStdin(arg string) bool {
	switch arg {
	case "-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}

// isPipe tells whether arg is a FIFO or a pipe, such as bash's <(...).
func isPipe(arg string) bool {
	fi, err := os.Stat(arg)
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// readPipedScript copies the script of a pipe (or of sbx's stdin) to a
// private host file, so that it goes into the workspace like any other
// input (nsjail.File.Data): at most max bytes. It returns the name the
// script came by ("stdin", or the pipe's path), which the Result's inputs
// show as its source.
//
// The file is unlinked as soon as it is made, so that it lives only as
// long as sbx holds it open: sbx waits on the pipe for as long as its
// writer takes, and a signal that ends it meanwhile (Ctrl-C, by design:
// internal/sigfwd), or a SIGKILL, used to leave the named copy in $TMPDIR.
func (s *script) readPipedScript(arg string) (string, error) {
	var r io.Reader = os.Stdin
	name := "stdin"
	if isStdin(arg) {
		s.usedStdin = true
	} else {
		f, err := os.Open(arg)
		if err != nil {
			return "", fmt.Errorf("script %s: %w", arg, unwrapPath(err))
		}
		defer f.Close()
		r, name = f, arg
	}
	tmp, err := os.CreateTemp("", "sbx-script-*.py")
	if err != nil {
		return "", fmt.Errorf("script from %s: %w", name, err)
	}
	s.tmp = tmp
	if err := os.Remove(tmp.Name()); err != nil {
		return "", fmt.Errorf("script from %s: unlink its copy: %w", name, err)
	}
	n, err := io.Copy(tmp, io.LimitReader(r, s.maxBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("script from %s: %w", name, err)
	case n > s.maxBytes:
		return "", fmt.Errorf("script from %s: more than %s, the workspace's size", name, units.HumanSize(s.maxBytes))
	}
	if hasInput(s.inputs, stdinScript) {
		return "", fmt.Errorf("script from %s: the input dir %s already has a %s, the name a script from a pipe takes", name, s.dir, stdinScript)
	}
	return name, nil
}

// notPython are the file name endings of scripts of other languages: one
// without a #! line would get a Python SyntaxError (issue 19, point 12).
var notPython = map[string]string{
	".sh": "#!/bin/sh", ".bash": "#!/bin/bash", ".zsh": "#!/bin/zsh", ".js": "#!/usr/bin/env node", ".mjs": "#!/usr/bin/env node",
	".ts": "#!/usr/bin/env node", ".rb": "#!/usr/bin/env ruby", ".pl": "#!/usr/bin/perl", ".php": "#!/usr/bin/env php", ".lua": "#!/usr/bin/env lua",
}

// interpreter is the argv that runs the script src (at dest in the
// workspace): the one its #! line names (execve(2) "Interpreter
// scripts": the interpreter, at most one argument, the script), python3
// if that line names Python or there is none. The interpreter must be in
// the sandbox's root, else the run is refused here, before any clone.
// The script is given to the interpreter rather than run itself: the
// workspace is noexec. A piped script is read from its copy (s.tmp).
func (s *script) interpreter(src, dest string) ([]string, error) {
	f := s.tmp
	if f == nil {
		var err error
		if f, err = os.Open(src); err != nil {
			return nil, fmt.Errorf("script %s: %w", src, unwrapPath(err))
		}
		defer f.Close()
	}
	// The kernel reads at most BINPRM_BUF_SIZE (256) bytes of the line.
	head := make([]byte, 256)
	n, _ := f.ReadAt(head, 0)
	head = head[:n]
	line, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		if want, other := notPython[strings.ToLower(filepath.Ext(dest))]; other {
			s.warnings = append(s.warnings, fmt.Sprintf("script %s has no #! line, so it runs with python3; start it with a line such as %q to run it with another interpreter", dest, want))
		}
		return []string{"python3", dest}, nil
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	interp, arg, _ := strings.Cut(strings.TrimSpace(strings.ReplaceAll(string(line), "\t", " ")), " ")
	arg = strings.TrimSpace(arg)
	prog := filepath.Base(interp)
	if interp == "" {
		return nil, fmt.Errorf("script %s: its #! line names no interpreter", dest)
	}
	if strings.HasPrefix(prog, "python") || (prog == "env" && strings.HasPrefix(arg, "python")) {
		return []string{"python3", dest}, nil
	}
	if !filepath.IsAbs(interp) {
		return nil, fmt.Errorf("script %s: its #! line names %q, not an absolute path", dest, interp)
	}
	if _, err := os.Stat(filepath.Join(s.rootfs, interp)); err != nil {
		return nil, fmt.Errorf("script %s: its #! line names %s, which the sandbox's root (%s) does not have: %w", dest, interp, s.rootfs, unwrapPath(err))
	}
	argv := []string{interp}
	if arg != "" {
		argv = append(argv, arg)
	}
	return append(argv, dest), nil
}

// errUseStdin is the advice for code too big for the command line.
var errUseStdin = errors.New("give the code on stdin instead: sbx exec - < code.py")

// checkExecSize is engine.CheckExecSize; fromC says that argv[2] is -c's
// CODE, which can come on stdin instead.
func checkExecSize(argv, env []string, fromC bool) error {
	err := engine.CheckExecSize(argv, env)
	var tb *engine.ArgTooBigError
	if fromC && errors.As(err, &tb) && (tb.Index == 2 || tb.Index < 0) {
		if tb.Index == 2 {
			return fmt.Errorf("-c CODE is %s, past the kernel's %s limit for one argument (MAX_ARG_STRLEN, execve(2)): %w",
				units.HumanSize(int64(tb.Size)), units.HumanSize(int64(tb.Limit)), errUseStdin)
		}
		return fmt.Errorf("%w: %w", err, errUseStdin)
	}
	return err
}
