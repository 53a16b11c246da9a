//go:build integration

package pool

import (
	"context"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/tests/internal/selfhost"
)

// A warm payload's uncaught exception is in its Result, as a cold one's
// (issue 15, item 5): the driver that runs it reports it in-process.
func TestWarmPyError(t *testing.T) {
	selfhost.BothUsers(t, func(t *testing.T) {
		p := nsjail.Payload{Argv: []string{"python3", "-c", "def f():\n    raise ValueError('bad value')\nf()"}}
		for _, mode := range []string{"cold", "warm"} {
			var res *nsjail.Result
			if mode == "cold" {
				res = runCold(t, "standard", p)
			} else {
				sb, _ := startWarm(t, "standard", "json")
				var err error
				if res, err = sb.Exec(context.Background(), p, nsjail.IO{}); err != nil {
					t.Fatal(err)
				}
			}
			e := res.Error
			if e == nil || e.Name != "ValueError" || e.Value != "bad value" || len(e.Traceback) != 2 || e.Traceback[1].Code != "raise ValueError('bad value')" || e.Traceback[1].Function != "f" {
				t.Errorf("%s: error %+v (status %s, stderr %q)", mode, e, res.Status, res.Stderr)
			}
		}
	})
}
