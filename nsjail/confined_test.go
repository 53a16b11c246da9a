package nsjail

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/seccomp"
)

// TestPolicyAllowsConfinedInit holds every built-in policy, and the init
// guard that "none" loads, to what the init still does under its
// payload's filter: the init confines itself before it says ready
// (init_linux.go), so a policy that refused one of these calls would make
// every run of its profile fail, or count the init's calls as the
// payload's denials.
func TestPolicyAllowsConfinedInit(t *testing.T) {
	for _, name := range seccomp.Names() {
		p, err := seccomp.ForRun(name)
		if err != nil || p == nil {
			t.Fatalf("ForRun(%q) = %v, %v", name, p, err)
		}
		t.Run(name, func(t *testing.T) {
			for _, c := range postConfineSyscalls {
				// A hold (the payload's setsid) lets the call run.
				if act, errno := p.Decide(c.Name, c.Args); act != seccomp.ActAllow && act != seccomp.ActHold {
					t.Errorf("%s%#x (%s): %s errno %d, want allow", c.Name, c.Args, c.Why, act, errno)
				}
			}
		})
	}
}

// TestConfinedCallsKnown keeps the list honest: every name is a syscall
// of this architecture, once, with a reason.
func TestConfinedCallsKnown(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range postConfineSyscalls {
		if _, err := seccomp.SyscallNumber(c.Name); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		if c.Why == "" {
			t.Errorf("%s: no reason given", c.Name)
		}
		key := c.Name
		if seen[key] {
			t.Errorf("%s listed twice", c.Name)
		}
		seen[key] = true
	}
}

func TestWithEnv(t *testing.T) {
	for _, tc := range []struct {
		name              string
		base, extra, want []string
	}{
		{"no additions", []string{"A=1", "B=2"}, nil, []string{"A=1", "B=2"}},
		{"replaced in place", []string{"A=1", "B=2"}, []string{"A=x"}, []string{"A=x", "B=2"}},
		{"appended", []string{"A=1"}, []string{"C=3", "D=4"}, []string{"A=1", "C=3", "D=4"}},
		{"last addition wins", []string{"A=1"}, []string{"C=3", "C=4", "A="}, []string{"A=", "C=4"}},
		{"value with =", nil, []string{"Q=a=b"}, []string{"Q=a=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := append([]string{}, tc.base...)
			got := withEnv(base, tc.extra)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("withEnv(%q, %q) = %q, want %q", tc.base, tc.extra, got, tc.want)
			}
			if strings.Join(base, "\n") != strings.Join(tc.base, "\n") {
				t.Errorf("withEnv changed its base: %q", base)
			}
		})
	}
}

// TestPayloadCarriesTheRequest: what one request varies crosses in the
// Payload, and the Spec has no field left for it (issue 12, item 3).
func TestPayloadCarriesTheRequest(t *testing.T) {
	b, err := json.Marshal(Spec{Outputs: OutputSpec{Send: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"send"`, `"timings"`, `"env":["`} {
		if strings.Contains(string(b), k) {
			t.Errorf("the Spec carries %s: %s", k, b)
		}
	}
	p := Payload{Argv: []string{"x"}, Env: []string{"A=1"}, Send: true, Timings: true}
	b, err = json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"send":true`, `"timings":true`, `"env":["A=1"]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("the Payload lacks %s: %s", k, b)
		}
	}
	if err := CheckPayload(&Payload{Argv: []string{"x"}, Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("CheckPayload accepts env NOEQUALS")
	}
}
