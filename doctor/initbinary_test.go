package doctor

import (
	"errors"
	"strings"
	"testing"
)

// TestInitBinary: the "init binary" check fails when the memfd cannot be
// exec'd (every sandbox would fail to start), warns when a build that
// embeds sbx-init falls back to itself, and informs for a plain build.
func TestInitBinary(t *testing.T) {
	for _, tc := range []struct {
		name            string
		embedded, memfd bool
		execErr         error
		want            Status
	}{
		{"memfd runs", true, true, nil, OK},
		{"memfd exec refused", true, true, errors.New("permission denied"), Fail},
		{"memfd not made", true, false, nil, Warn},
		{"plain build", false, false, nil, Info},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c := InitBinary(tc.embedded, tc.memfd, "x", tc.execErr); c.Status != tc.want {
				t.Errorf("InitBinary = %+v, want status %s", c, tc.want)
			}
		})
	}
}

// TestSbxBinary: the lean sbx whose hand-off fails warns (sbx serve
// cannot run; the rest can), and says why; otherwise OK.
func TestSbxBinary(t *testing.T) {
	if c := SbxBinary(false, 20<<20, 0, nil); c.Status != OK || !strings.Contains(c.Detail, "the full sbx") {
		t.Errorf("full = %+v", c)
	}
	if c := SbxBinary(true, 36<<20, 20<<20, nil); c.Status != OK || !strings.Contains(c.Detail, "the lean sbx (36.0 MB") || !strings.Contains(c.Detail, "full sbx (20.0 MB)") {
		t.Errorf("lean = %+v", c)
	}
	c := SbxBinary(true, 36<<20, 20<<20, errors.New("memfd_create: EPERM"))
	if c.Status != Warn || !strings.Contains(c.Detail, "fails here: memfd_create: EPERM") || c.Fix == "" {
		t.Errorf("lean, hand-off refused = %+v", c)
	}
}
