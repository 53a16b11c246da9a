package nsjail

import (
	"strings"
	"testing"
	"time"
)

func TestWarmArgv(t *testing.T) {
	for _, tc := range []struct {
		argv, env []string
		want      bool
	}{
		{[]string{"python3", "/workspace/a.py"}, nil, true},
		{[]string{"python3", "a.py", "-x"}, nil, true},
		{[]string{"python3", "-c", "print(1)", "arg"}, []string{"EXTRA=1"}, true},
		{[]string{"python3"}, nil, false},               // the REPL on stdin
		{[]string{"python3", "-c"}, nil, false},         // CPython's own error
		{[]string{"python3", "-u", "a.py"}, nil, false}, // an option changes the start
		{[]string{"python3", "-", "a"}, nil, false},     // the script on stdin
		{[]string{"python3", ""}, nil, false},           // CPython's own error
		{[]string{"python3", "a.py"}, []string{"PYTHONPATH=/x"}, false},
		{[]string{"python3", "a.py"}, []string{"LC_ALL=C"}, false},
		{[]string{"python3", "a.py"}, []string{"LANG=C"}, false},
		{[]string{"python3", "a.py"}, []string{"HOME=/tmp"}, false},
		{[]string{"python3", "a.py"}, []string{"OMP_NUM_THREADS=1"}, false},
		{[]string{"python3", "a.py"}, []string{"HOMEPAGE=x", "TZDIR=y"}, true},
	} {
		if got := warmArgv(tc.argv, tc.env); got != tc.want {
			t.Errorf("warmArgv(%q, %q) = %v, want %v", tc.argv, tc.env, got, tc.want)
		}
	}
}

func TestLowerRlimits(t *testing.T) {
	base := []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}, {Resource: "RLIMIT_FSIZE", Soft: 100, Hard: 200}, {Resource: "RLIMIT_CPU", Soft: 91, Hard: 92}, {Resource: "RLIMIT_SIGPENDING", Soft: 50, Hard: 50}}
	got := lowerRlimits(base, []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 64, Hard: 64}, {Resource: "RLIMIT_FSIZE", Soft: 1 << 40, Hard: 1 << 40}, {Resource: "RLIMIT_MSGQUEUE", Soft: 8, Hard: 8}, {Resource: "RLIMIT_CPU", Soft: 61, Hard: 62}, {Resource: "RLIMIT_SIGPENDING", Soft: 70, Hard: 10}})
	want := []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 64, Hard: 64}, {Resource: "RLIMIT_FSIZE", Soft: 100, Hard: 200}, {Resource: "RLIMIT_CPU", Soft: 61, Hard: 62}, {Resource: "RLIMIT_SIGPENDING", Soft: 10, Hard: 10}, {Resource: "RLIMIT_MSGQUEUE", Soft: 8, Hard: 8}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if base[0].Hard != 1024 {
		t.Errorf("lowerRlimits changed its base: %v", base)
	}
}

// TestCheckWarmAndLower goes through the exported checks (Spec.Validate,
// CheckPayload, CheckModuleName), wherever the contract types live.
func TestCheckWarmAndLower(t *testing.T) {
	for _, tc := range []struct {
		w    *Warm
		want string
	}{
		{&Warm{Interpreter: "python3", Preload: []string{"numpy", "matplotlib.pyplot", "_x1"}}, ""},
		{&Warm{Interpreter: ""}, "warm interpreter"},
		{&Warm{Interpreter: "python3", Preload: []string{"os; import x"}}, "not an identifier"},
		{&Warm{Interpreter: "python3", Preload: []string{"a..b"}}, "not an identifier"},
		{&Warm{Interpreter: "python3", Preload: []string{"1abc"}}, "not an identifier"},
		{&Warm{Interpreter: "python3", Preload: make([]string, MaxPreload+1)}, "at most"},
	} {
		err := (&Spec{Warm: tc.w}).Validate() // fails on much else: look for the warm part
		hasWarm := err != nil && strings.Contains(err.Error(), "warm")
		if hasWarm != (tc.want != "") || tc.want != "" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate of Warm %+v: %v, want %q", tc.w, err, tc.want)
		}
	}
	if err := CheckModuleName("pandas.core"); err != nil {
		t.Errorf("CheckModuleName(pandas.core): %v", err)
	}
	for _, tc := range []struct {
		l    *Lower
		want string
	}{
		{nil, ""},
		{&Lower{Timeout: 1, Rlimits: []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 1, Hard: 1}}}, ""},
		{&Lower{Timeout: -1}, "positive"},
		{&Lower{Rlimits: []Rlimit{{Resource: "RLIMIT_CORE", Soft: 0, Hard: 0}}}, "sandbox's own"},
		{&Lower{Rlimits: []Rlimit{{Resource: "RLIMIT_BOGUS", Soft: 0, Hard: 0}}}, "unknown resource"},
	} {
		err := CheckPayload(&Payload{Argv: []string{"x"}, Lower: tc.l})
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckPayload with Lower %+v: %v, want %q", tc.l, err, tc.want)
		}
	}
}

func TestRebaseCPURlimit(t *testing.T) {
	rl := []Rlimit{{Resource: "RLIMIT_CPU", Soft: 6 + 30, Hard: 7 + 30}}
	if got := rebaseCPURlimit(rl, 1500*time.Millisecond); got == nil || *got != (Rlimit{Resource: "RLIMIT_CPU", Soft: 8, Hard: 9}) {
		t.Errorf("rebase after a 1.5 s preload: %v, want 8/9 (the cold 6/7 plus 2 s)", got)
	}
	if got := rebaseCPURlimit(rl, time.Minute); got != nil {
		t.Errorf("a preload past the budget: %v, want no change", got)
	}
	if got := rebaseCPURlimit(nil, 0); got != nil {
		t.Errorf("no backstop: %v", got)
	}
}

func TestWarmHandoff(t *testing.T) {
	b := warmHandoff("sbx-report-00", 4096, []string{"python3", "-c", "x"}, []string{"A=1", "B="})
	if got, want := string(b), "sbx-report-00\x004096\x003\x00python3\x00-c\x00x\x00A=1\x00B="; got != want {
		t.Errorf("warmHandoff = %q, want %q", got, want)
	}
}

func TestIsPythonProgram(t *testing.T) {
	for name, want := range map[string]bool{"python3": true, "python3.11": true, "python3.": false, "python3.x": false, "python": false, "python3-config": false, "xpython3": false} {
		if got := isPythonProgram(name); got != want {
			t.Errorf("isPythonProgram(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseReport(t *testing.T) {
	rec := func(kind byte, body string) string {
		return string([]byte{kind, 0, 0, byte(len(body) >> 8), byte(len(body))}) + body
	}
	png := "\x89PNG..."
	for _, tc := range []struct {
		name    string
		in      string
		ok      bool
		err     string
		figures int
		cut     bool
	}{
		{"empty", "", false, "", 0, false},
		{"end only", rec('z', ""), true, "", 0, false},
		{"error and figures", rec('e', "ZeroDivisionError\x00division by zero\x00<string>\x001\x00<module>\x001/0") + rec('f', png) + rec('f', png) + rec('z', ""), true, "ZeroDivisionError", 2, false},
		{"cut figures", rec('f', png) + rec('t', "") + rec('z', ""), true, "", 1, true},
		{"no end: cut short", rec('f', png), false, "", 0, false},
		{"after the end", rec('z', "") + rec('f', png), false, "", 0, false},
		{"length past the data", "f\x00\x00\x01\x00abc", false, "", 0, false},
		{"unknown kind", rec('q', "") + rec('z', ""), false, "", 0, false},
		{"bad error", rec('e', "x\x00y\x00f\x00notanumber\x00fn\x00code") + rec('z', ""), false, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := parseReport([]byte(tc.in))
			name := ""
			if r.err != nil {
				name = r.err.Name
			}
			if ok != tc.ok || name != tc.err || len(r.figures) != tc.figures || r.figuresCut != tc.cut {
				t.Errorf("parseReport: ok %v, error %q, %d figures, cut %v; want %v %q %d %v", ok, name, len(r.figures), r.figuresCut, tc.ok, tc.err, tc.figures, tc.cut)
			}
		})
	}
}
