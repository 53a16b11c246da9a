//go:build integration

package pool

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestRunPayloadOverTheFrameLeavesNothing: Run encodes its payload's
// control line once the cgroup is being made (issue 13: the encode then
// runs beside the cgroup's mkdirs), no longer before anything is built. A
// payload too large for the control pipe must still fail the run with
// why, before any init is cloned, and leave no cgroup behind. (A guard of
// the behaviour kept, not of a bug: it passes before and after.)
func TestRunPayloadOverTheFrameLeavesNothing(t *testing.T) {
	j := job(t, "strict", false)
	// 16 MiB of argv: over the Payload's frame, and never seen by the
	// CLI's ARG_MAX check, which an API caller skips.
	j.Payload = nsjail.Payload{Argv: []string{"python3", "-c", strings.Repeat("x", 16<<20)}}
	var timings bytes.Buffer
	j.Timings = &timings
	res := nsjail.Run(t.Context(), j)
	if res.Status != nsjail.StatusSetupError || !strings.Contains(res.Message, "encode payload") || !strings.Contains(res.Message, "more than the control pipe's") {
		t.Fatalf("status %s, message %q: want a setup_error naming the payload's encode and the frame", res.Status, res.Message)
	}
	if !strings.Contains(timings.String(), "sbx: limits set up") {
		t.Fatalf("no timeline:\n%s", timings.String())
	}
	if strings.Contains(timings.String(), "clone") {
		t.Errorf("an init was cloned for a payload that cannot cross:\n%s", timings.String())
	}
	// Every hierarchy of this process: no sbx-<id> left in any.
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := "/sys/fs/cgroup/" + strings.Split(f[1], ",")[0]
		if f[1] == "" {
			dir = "/sys/fs/cgroup/unified"
		}
		p := filepath.Join(dir, f[2], "sbx-"+j.Spec.ID)
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}
