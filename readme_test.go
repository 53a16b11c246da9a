package main

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestDocsCommandsExist checks the `sbx ...` command lines of the README's
// and docs/profiles.md's code blocks against the CLI: every command and
// subcommand exists, and every flag is one of that command's (issue 19,
// point 17). A flag renamed or a command not built (sbx serve) fails here.
func TestDocsCommandsExist(t *testing.T) {
	app := newApp([]string{"sbx"})
	n := 0
	for _, doc := range []string{"README.md", "docs/profiles.md"} {
		for _, line := range codeLines(t, doc) {
			words := shellWords(line)
			if len(words) == 0 || (words[0] != "sbx" && words[0] != "./sbx") {
				continue
			}
			if slices.ContainsFunc(words[1:min(3, len(words))], func(w string) bool { return strings.HasSuffix(w, ":") }) {
				continue // a sample of output: "sbx doctor --self-test: kernel ..."
			}
			n++
			if err := checkCommandLine(app, words); err != "" {
				t.Errorf("%s: %q: %s", doc, line, err)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d sbx command lines found in the docs' code blocks: is the parser broken?", n)
	}
}

// codeLines are the lines of doc's fenced code blocks, a leading "$ " or
// "make && " dropped.
func codeLines(t *testing.T, doc string) []string {
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if in {
			l = strings.TrimPrefix(l, "$ ")
			l = strings.TrimPrefix(l, "make && ")
			out = append(out, l)
		}
	}
	return out
}

// shellWords splits a command line as sh would, quotes removed, up to a
// comment or the first redirection, pipe or list operator.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case !inWord && strings.ContainsRune("#<>|;&", r):
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// checkCommandLine walks words (words[0] is sbx) down the command tree and
// checks each flag against the command reached; "" if all is well.
func checkCommandLine(app *cli.App, words []string) string {
	flags, subs, name := app.Flags, app.Commands, "sbx"
	flags = append(flags, cli.VersionFlag)
	isExec := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			return ""
		}
		if strings.HasPrefix(w, "-") && w != "-" {
			f, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if !hasFlag(flags, f) && f != "help" && f != "h" {
				return "no flag " + w + " in " + name
			}
			if takesValue(flags, f) && !strings.Contains(w, "=") {
				i++
			}
			continue
		}
		if cmd := findCommand(subs, w); cmd != nil {
			flags, subs, name, isExec = cmd.Flags, cmd.Subcommands, name+" "+cmd.Name, cmd.Name == "exec"
			continue
		}
		if len(subs) > 0 {
			return "no command " + w + " in " + name
		}
		if isExec {
			return "" // the script's name: what follows is its own
		}
	}
	return ""
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if slices.Contains(c.Names(), name) {
			return c
		}
	}
	return nil
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// takesValue tells whether the flag reads the next word as its value.
func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			dv, ok := f.(cli.DocGenerationFlag)
			return !ok || dv.TakesValue()
		}
	}
	return false
}
