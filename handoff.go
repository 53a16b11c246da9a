package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/internal/fullbin"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// buildKind says which of `make sbx`'s two builds of package main this
// is (internal/fullbin).
type buildKind string

const (
	// buildLean: -tags sbx_lean, without the commands in handedOff, which
	// it hands to the full sbx it embeds.
	buildLean buildKind = "lean"
	// buildFull: every command (a plain `go build` too).
	buildFull buildKind = "full"
)

// handOff execs the full sbx with this process's argv and environment
// when the command argv names is one the lean sbx hands off; it returns
// when there is nothing to hand off, and exits 125, saying why, when the
// hand-off failed. main calls it first thing, before the CLI parses
// anything: stdin and every fd reach the full sbx untouched.
func handOff(argv []string) {
	cmd := handOffCommand(argv, handedOff)
	if cmd == "" {
		return
	}
	err := fullbin.Exec(argv, os.Environ())
	fmt.Fprintln(os.Stderr, "sbx: "+handOffFailed(cmd, err))
	os.Exit(nsjail.ExitSbxFailed)
}

// handOffFailed is the message of a failed hand-off of what: a command
// ("serve"), or what of one only the full sbx does ("exec on an image").
func handOffFailed(what string, err error) string {
	return fmt.Sprintf("sbx %s is run by the full sbx, which this lean sbx embeds, and it could not be started: %v", what, err)
}

// handOffNow is handOff from a command's action: the full sbx gets
// os.Args as they are. It returns only on failure, with the exit error.
func handOffNow(what string) error {
	return cli.Exit(handOffError(what), nsjail.ExitSbxFailed)
}

// handOffError execs the full sbx with os.Args and the environment, as
// handOffNow; it returns only on failure, with handOffFailed's message.
func handOffError(what string) error {
	return errors.New(handOffFailed(what, fullbin.Exec(os.Args, os.Environ())))
}

// needsFull tells whether err is the lean engine's: the command's
// profile names an image, which only the full sbx runs
// (engine/image_lean.go). The full engine never returns it.
func needsFull(err error) bool {
	var nf *engine.NeedsFullError
	return errors.As(err, &nf)
}

// handOffCommand is the command of argv that is among handedOff, or "":
// the first argument that is not a flag (sbx's own flags, --help and
// --version, take no value), or, after `help` (or `h`), the one it asks
// about: `sbx serve ...`, `sbx --help serve`, `sbx help serve`.
func handOffCommand(argv, handedOff []string) string {
	afterHelp := false
	for _, a := range argv[min(1, len(argv)):] {
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, "-"):
			continue
		case !afterHelp && (a == "help" || a == "h"):
			afterHelp = true
			continue
		case slices.Contains(handedOff, a):
			return a
		}
		return ""
	}
	return ""
}
