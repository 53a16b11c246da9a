package serve

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want time.Duration
		ok   bool
	}{
		{``, 5 * time.Second, true}, {`null`, 5 * time.Second, true}, {`"30s"`, 30 * time.Second, true}, {`2`, 2 * time.Second, true},
		{`0.5`, 500 * time.Millisecond, true}, {`"0s"`, 0, false}, {`-1`, 0, false}, {`"soon"`, 0, false}, {`{}`, 0, false},
	} {
		got, err := parseDuration(json.RawMessage(tc.raw), "ttl", 5*time.Second)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseDuration(%s) = %v, %v; want %v ok %v", tc.raw, got, err, tc.want, tc.ok)
		}
	}
}

// TestSessionMetrics: the session counters are client_golang metrics in
// ops's registry (no hand-written exposition), and the session code's
// hooks move them.
func TestSessionMetrics(t *testing.T) {
	s, err := New(Config{Profiles: []string{"standard"}})
	if err != nil {
		t.Fatal(err)
	}
	s.sess.metrics.sessionExecuted(nsjail.ExecOK)
	s.sess.metrics.sessionExecuted(nsjail.ExecOK)
	s.sess.metrics.sessionExecuted(nsjail.ExecTimeout)
	s.sess.metrics.sessionEnded(EndTTL)
	s.sess.mu.Lock()
	s.sess.byID["starting"] = nil
	s.sess.mu.Unlock()
	fams, err := s.Metrics().reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				key += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{
		`sbx_sessions_active`: 1, `sbx_session_executions_total{status="ok"}`: 2, `sbx_session_executions_total{status="timeout"}`: 1,
		`sbx_session_ends_total{reason="ttl"}`: 1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}
