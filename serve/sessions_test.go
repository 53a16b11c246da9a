package serve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

func TestSessionMetricsText(t *testing.T) {
	s, err := New(Config{Profiles: []string{"standard"}})
	if err != nil {
		t.Fatal(err)
	}
	s.sess.execs["ok"] = 3
	s.sess.ends[EndTTL] = 1
	var b strings.Builder
	s.WriteSessionMetrics(&b)
	for _, want := range []string{"sbx_sessions_active 0\n", `sbx_session_executions_total{status="ok"} 3`, `sbx_session_ends_total{reason="ttl"} 1`, `sbx_session_ends_total{reason="idle"} 0`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}
