// Command testsummary runs a go test command and says what ran: one line
// per test as it ends (for `go test -json`), the output of each failing
// test, and at the end one line counting what passed, failed and was
// skipped as root, as uid 65534 (the harness's subtests of those names)
// and otherwise. `make test` and `make vmtest` use it (issue 19, point
// 19): the integration phase was silent for a minute.
//
//	go run ./internal/testsummary -label integration -o build/test-summary -- go test -json ./tests/
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Test    string
	Package string
	Output  string
	Elapsed float64
}

// counts are per runner: "root", "uid65534", ... or "" for tests that
// do not run per identity (counted at the top level, once).
type counts struct {
	runner  map[string]*[3]int // pass, fail, skip
	perUser map[string]bool    // top-level tests with runner subtests
	top     map[string]int     // top-level test -> its result
	// tests and packages are how long each top-level test and each test
	// binary took (go test -json's Elapsed), to say where the time went.
	tests, packages []took
}

// took is one test's or one package's wall time, in seconds.
type took struct {
	name    string
	seconds float64
}

var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)

func main() {
	label := flag.String("label", "tests", "what the line at the end calls this phase")
	outFile := flag.String("o", "", "also write the line at the end to this file")
	slowest := flag.Int("slowest", 10, "name this many of the slowest top-level tests at the end (go test -json)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "testsummary: want -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	c := read(stdout, os.Stdout)
	err = cmd.Wait()
	line := fmt.Sprintf("%s: %s", *label, c.String())
	if err != nil {
		line += fmt.Sprintf(" (%s: %v)", flag.Arg(0), err)
	}
	fmt.Println("make: " + line)
	// The plain closing line a CI reader counts: "N passed, N failed".
	if s := c.slowest(*slowest); s != "" {
		fmt.Printf("make: %s: %s\n", *label, s)
	}
	p, f, k := c.total()
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *label, p, f, k)
	if *outFile != "" {
		if werr := os.WriteFile(*outFile, []byte(line+"\n"), 0o644); werr != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", werr)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	} else if err != nil {
		os.Exit(2)
	}
}

// read passes text lines through (go test -v) and turns JSON events into
// one line per top-level test, with a failing test's whole output.
func read(r io.Reader, w io.Writer) *counts {
	c := &counts{runner: map[string]*[3]int{}, perUser: map[string]bool{}, top: map[string]int{}}
	output := map[string][]string{} // top-level test -> its output, until it ends
	// longest is the longest subtest of each top-level test: go test
	// reports a test whose subtests run in parallel (t.Parallel) as
	// taking 0.00s, its own function having returned before they ended.
	longest := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		text := sc.Text()
		var ev event
		if !strings.HasPrefix(text, "{") || json.Unmarshal([]byte(text), &ev) != nil {
			fmt.Fprintln(w, text)
			c.count(text)
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		switch {
		case ev.Action == "output":
			c.count(ev.Output)
			if top != "" {
				output[top] = append(output[top], ev.Output)
			} else if !strings.HasPrefix(ev.Output, "PASS") && !strings.HasPrefix(ev.Output, "ok ") && !strings.HasPrefix(ev.Output, "=== ") {
				fmt.Fprint(w, ev.Output)
			}
		case ev.Test == "" && ev.Package != "" && (ev.Action == "pass" || ev.Action == "fail"):
			c.packages = append(c.packages, took{ev.Package, ev.Elapsed})
		case ev.Test != top && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			longest[top] = max(longest[top], ev.Elapsed)
		case ev.Test == "" || ev.Test != top:
		case ev.Action == "pass" || ev.Action == "skip":
			elapsed := max(ev.Elapsed, longest[top])
			fmt.Fprintf(w, "  %-4s %s (%.1fs)\n", ev.Action, ev.Test, elapsed)
			c.tests = append(c.tests, took{ev.Test, elapsed})
			delete(output, top)
		case ev.Action == "fail":
			elapsed := max(ev.Elapsed, longest[top])
			fmt.Fprintf(w, "  FAIL %s (%.1fs)\n", ev.Test, elapsed)
			c.tests = append(c.tests, took{ev.Test, elapsed})
			for _, o := range output[top] {
				fmt.Fprint(w, "       "+o)
			}
			delete(output, top)
		}
	}
	return c
}

// count takes one "--- PASS: TestX/root (0.1s)" line: a test is counted
// once per runner, at the subtest named after it, or once at the top if
// it has no runner subtests.
func (c *counts) count(line string) {
	m := resultLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	k := map[string]int{"PASS": 0, "FAIL": 1, "SKIP": 2}[m[1]]
	parts := strings.Split(m[2], "/")
	// go test makes a repeated subtest name unique with "#01" (testing's
	// subtest naming): it is the same runner.
	last, _, _ := strings.Cut(parts[len(parts)-1], "#")
	switch {
	case len(parts) == 1:
		c.top[parts[0]] = k
	case len(parts) == 2 && (last == "root" || strings.HasPrefix(last, "uid")):
		c.perUser[parts[0]] = true
		if c.runner[last] == nil {
			c.runner[last] = &[3]int{}
		}
		c.runner[last][k]++
	}
}

func (c *counts) String() string {
	for t, k := range c.top {
		if !c.perUser[t] {
			if c.runner[""] == nil {
				c.runner[""] = &[3]int{}
			}
			c.runner[""][k]++
		}
	}
	var names []string
	for n := range c.runner {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return order(names[i]) < order(names[j]) })
	var parts []string
	for _, n := range names {
		v := c.runner[n]
		what := "as " + strings.Replace(n, "uid", "uid ", 1)
		if n == "" {
			what = "not per user"
		}
		parts = append(parts, fmt.Sprintf("%s %d passed, %d failed, %d skipped", what, v[0], v[1], v[2]))
	}
	if len(parts) == 0 {
		return "no test results seen"
	}
	return strings.Join(parts, "; ")
}

// slowest says where the time went: each test binary's wall time (its
// TestMain included: the tests package builds sbx there), the sum of the
// top-level tests, and the n slowest of them with their share of it.
// Empty when go test -json reported no times.
func (c *counts) slowest(n int) string {
	var parts []string
	for _, p := range c.packages {
		parts = append(parts, fmt.Sprintf("%s %.1fs", p.name, p.seconds))
	}
	sum := 0.0
	for _, t := range c.tests {
		sum += t.seconds
	}
	if len(c.tests) > 0 && n > 0 && sum > 0 {
		tests := append([]took(nil), c.tests...)
		sort.SliceStable(tests, func(i, j int) bool { return tests[i].seconds > tests[j].seconds })
		var top []string
		for _, t := range tests[:min(n, len(tests))] {
			top = append(top, fmt.Sprintf("%s %.1fs (%.0f%%)", t.name, t.seconds, 100*t.seconds/sum))
		}
		parts = append(parts, fmt.Sprintf("%d tests %.1fs, the slowest: %s", len(tests), sum, strings.Join(top, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "took " + strings.Join(parts, "; ")
}

// total adds up every runner's counts (after String has folded in the
// top-level tests).
func (c *counts) total() (pass, fail, skip int) {
	for _, v := range c.runner {
		pass, fail, skip = pass+v[0], fail+v[1], skip+v[2]
	}
	return
}

func order(n string) string {
	switch n {
	case "root":
		return "0"
	case "":
		return "9"
	}
	return "1" + n
}
