package rootfs

import (
	"strings"
	"testing"
)

func TestSplitBind(t *testing.T) {
	for in, want := range map[string][2]string{"/a": {"/a", "/a"}, "/a:/b": {"/a", "/b"}, "/a:": {"/a", "/a"}} {
		if src, dst := SplitBind(in); src != want[0] || dst != want[1] {
			t.Errorf("SplitBind(%q) = %q, %q, want %q", in, src, dst, want)
		}
	}
}

// TestCheckBindDest: a DEST other than SRC never makes its mount point in
// a host directory: not in the root's entries, not below another bind.
func TestCheckBindDest(t *testing.T) {
	top := []string{"usr", "bin", "lib"}
	for _, tc := range []struct {
		src, dst string
		binds    []string
		want     string
	}{
		{"/srv/m", "/srv/m", nil, ""},
		{"/srv/m", "/data", nil, ""},
		{"/srv/m", "/usr/share/m", nil, "/usr is the sandbox's root"},
		{"/srv/b", "/data/x", []string{"/srv/a:/data", "/srv/b:/data/x"}, "below the bind at /data"},
		{"/srv/a/x", "/srv/a/x", []string{"/srv/a", "/srv/a/x"}, ""},
	} {
		err := checkBindDest(tc.src, tc.dst, top, tc.binds)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkBindDest(%s, %s) = %v, want %q", tc.src, tc.dst, err, tc.want)
		}
	}
}
