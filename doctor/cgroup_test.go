package doctor

import (
	"errors"
	"strings"
	"testing"
)

// TestCgroupFixFitsTheHierarchy: a cgroup v1 host is not told to use
// systemd's user delegation or cgroup.subtree_control, which are v2's.
func TestCgroupFixFitsTheHierarchy(t *testing.T) {
	none := func() (string, []string, error) { return "none", nil, errors.New("no writable cgroup") }
	some := func() (string, []string, error) { return "cgroup1", []string{"memory"}, nil }
	for _, tc := range []struct {
		name          string
		probe         func() (string, []string, error)
		unified       bool
		want, wantNot string
	}{
		{"none on v2", none, true, "systemd-run --user", "v1"},
		{"none on v1", none, false, "cgroup v1", "systemd-run --user"},
		{"missing on v2", some, true, "cgroup.subtree_control", "v1"},
		{"missing on v1", some, false, "cgroup v1 hierarchies", "subtree_control"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Cgroup(tc.probe, tc.unified)
			if c.Status != Warn || !strings.Contains(c.Fix, tc.want) || strings.Contains(c.Fix, tc.wantNot) {
				t.Errorf("%s: fix %q, want %q and not %q", c.Status, c.Fix, tc.want, tc.wantNot)
			}
		})
	}
}
