package doctor

import (
	"errors"
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
