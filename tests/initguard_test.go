//go:build integration

package tests

import (
	"encoding/json"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestPayloadCannotReachInit: a payload of the init's own uid tries to
// change the init's limits (on pid 1 and on each of the init's threads by
// tid), signal it, move its scheduling, and write its /proc files. Each
// attempt fails, under every policy (under "none", the init guard alone),
// and the file it wrote first is in the report.
func TestPayloadCannotReachInit(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, profile := range []string{"standard", "strict", data("profiles/no-seccomp.toml")} {
			res, out := r.result(t, "--profile", profile, data("reach_init.py"))
			if res.Status != nsjail.StatusOK {
				t.Fatalf("%s: status %s (%s), want ok\nstdout %s\nstderr %s\nsbx: %s", profile, res.Status, res.Message, res.Stdout, res.Stderr, out.stderr)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil || len(got) < 10 {
				t.Fatalf("%s: payload output %q: %v", profile, res.Stdout, err)
			}
			for attempt, errno := range got {
				if errno == "ok" {
					t.Errorf("%s: %s succeeded", profile, attempt)
				}
			}
			if len(res.Files) != 1 || res.Files[0].Path != "before.txt" || res.FilesTruncated {
				t.Errorf("%s: files %+v (truncated %v), want before.txt", profile, res.Files, res.FilesTruncated)
			}
		}
	})
}
