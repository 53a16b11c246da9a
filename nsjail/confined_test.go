package nsjail

import (
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
