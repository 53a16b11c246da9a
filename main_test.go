package main

import (
	"errors"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestAfterDoubleDash(t *testing.T) {
	cases := []struct {
		raw  []string
		n    int
		want bool
	}{
		{[]string{"sbx", "exec", "--", "python3", "-V"}, 2, true},
		{[]string{"sbx", "exec", "--json", "--", "ls"}, 1, true},
		{[]string{"sbx", "exec", "task.py", "--", "x"}, 3, false},
		{[]string{"sbx", "exec", "task.py"}, 1, false},
	}
	for _, tc := range cases {
		if got := afterDoubleDash(tc.raw, tc.n); got != tc.want {
			t.Errorf("afterDoubleDash(%v, %d) = %v", tc.raw, tc.n, got)
		}
	}
}

func TestParseFileFlag(t *testing.T) {
	f, err := parseFileFlag("testdata/hello.py:in/x.py")
	if err != nil || f.Path != "in/x.py" || f.Source != "testdata/hello.py" {
		t.Fatalf("%+v %v", f, err)
	}
	f, err = parseFileFlag("testdata/hello.py")
	if err != nil || f.Path != "hello.py" {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range []string{"testdata/hello.py:../x", "testdata/hello.py:/abs", "/no/such", ":x", "testdata:x"} {
		if _, err := parseFileFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJSONRequested(t *testing.T) {
	cases := []struct {
		raw  []string
		want bool
	}{
		{[]string{"sbx", "exec", "--json", "x.py"}, true},
		{[]string{"sbx", "exec", "--bogus", "--json", "-c", "1"}, true},
		{[]string{"sbx", "exec", "x.py", "--json"}, true},
		{[]string{"sbx", "exec", "-json", "x.py"}, true},
		{[]string{"sbx", "exec", "--json=true", "x.py"}, true},
		{[]string{"sbx", "exec", "--json=false", "x.py"}, false},
		{[]string{"sbx", "exec", "--jsonx", "x.py"}, false},
		{[]string{"sbx", "exec", "--", "prog", "--json"}, false},
		{[]string{"sbx", "exec", "-c", "json"}, false},
	}
	for _, tc := range cases {
		if got := jsonRequested(tc.raw); got != tc.want {
			t.Errorf("jsonRequested(%v) = %v", tc.raw, got)
		}
	}
}

func TestExplainFlagError(t *testing.T) {
	flags := []cli.Flag{&cli.StringFlag{Name: "memory"}, &cli.BoolFlag{Name: "json"}, &cli.StringFlag{Name: "c"}}
	cases := map[string]string{
		"flag provided but not defined: -memroy":   "unknown flag --memroy (did you mean --memory?)",
		"flag provided but not defined: -jsn":      "unknown flag --jsn (did you mean --json?)",
		"flag provided but not defined: -x":        "unknown flag -x (did you mean -c?)",
		"flag provided but not defined: -zzzzzzzz": "unknown flag --zzzzzzzz",
		"flag needs an argument: -memory":          "flag needs an argument: -memory",
	}
	for in, want := range cases {
		if got := explainFlagError(errors.New(in), flags); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestGoRelease(t *testing.T) {
	for in, want := range map[string]string{
		"go1.26.8":                       "go1.26.8",
		"go1.26.8-X:nogreenteagc":        "go1.26.8",
		"go1.26.8-X:nogreenteagc,jsonv2": "go1.26.8",
		"devel go1.27-abc123 X:jsonv2":   "devel go1.27-abc123",
	} {
		if got := goRelease(in); got != want {
			t.Errorf("goRelease(%q) = %q, want %q", in, got, want)
		}
	}
}
