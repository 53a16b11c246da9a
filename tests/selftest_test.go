//go:build integration

package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/doctor"
)

// `sbx doctor --self-test --json` runs every attempt on this host, as root
// and unprivileged; every one is blocked, and the exit status says so.
func TestDoctorSelfTest(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "doctor", "--self-test", "--json")
		var rep doctor.SelfTestReport
		dec := json.NewDecoder(strings.NewReader(out.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("doctor --self-test --json: %v\nstdout: %s\nstderr: %s", err, out.stdout, out.stderr)
		}
		if rep.UID != r.uid || len(rep.Findings) != len(doctor.Attempts()) {
			t.Fatalf("uid %d, %d findings; want uid %d and %d findings:\n%s", rep.UID, len(rep.Findings), r.uid, len(doctor.Attempts()), out.stdout)
		}
		all := true
		for _, f := range rep.Findings {
			all = all && f.Blocked
			if f.Means == "" || f.Detail == "" || f.Blocked != (f.Verdict == doctor.VerdictBlocked) {
				t.Errorf("%s: %+v: want a verdict, a meaning and a detail", f.Name, f)
			}
			if !f.Blocked {
				t.Errorf("%s: %s: %s (blocked means: %s)", f.Name, f.Verdict, f.Detail, f.Means)
			}
		}
		if rep.OK != all || (out.code == 0) != all {
			t.Errorf("ok %v, exit %d, every attempt blocked %v", rep.OK, out.code, all)
		}
	})
}
