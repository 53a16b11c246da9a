package nsjail

import (
	"errors"
	"slices"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail/spec"
	"github.com/sbx-sandbox/sbx/seccomp"
)

// TestRlimitNames holds the contract's list of rlimit names (what a Spec
// may set) to the init's table of their numbers.
func TestRlimitNames(t *testing.T) {
	names := spec.RlimitNames()
	for _, n := range names {
		if _, ok := rlimitResources[n]; !ok {
			t.Errorf("spec accepts %s, which the init cannot set", n)
		}
	}
	for n := range rlimitResources {
		if !slices.Contains(names, n) {
			t.Errorf("the init knows %s, which spec refuses", n)
		}
	}
}

// TestSeccompPolicyNames checks that every name the Spec accepts is a
// policy seccomp.Builtin knows.
func TestSeccompPolicyNames(t *testing.T) {
	for _, n := range seccomp.Names() {
		s := validSpec()
		s.Seccomp = n
		if err := s.Validate(); err != nil {
			t.Errorf("Spec with seccomp %q: %v", n, err)
		}
		if _, err := seccomp.Builtin(n); err != nil {
			t.Errorf("seccomp.Builtin(%q): %v", n, err)
		}
	}
}

// TestUnenforcedListOrder: the limits a cgroup cannot enforce are named in
// one order, whatever the map's, so that the warning and the error read
// the same on every run.
func TestUnenforcedListOrder(t *testing.T) {
	m := map[string]error{"pids": errors.New("no pids controller"), "cpus": errors.New("no cpu controller"), "memory": errors.New("no memory controller")}
	want := "cpus (no cpu controller), memory (no memory controller), pids (no pids controller)"
	for range 50 {
		if got := unenforcedList(m); got != want {
			t.Fatalf("unenforcedList = %q, want %q", got, want)
		}
	}
}
