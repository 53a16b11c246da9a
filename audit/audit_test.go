package audit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// A payload's & < > reach the line as themselves, not as six-byte \u0026
// escapes (issue 11, finding 1), and the line is one line.
func TestEncodeKeepsHTMLCharacters(t *testing.T) {
	amp := strings.Repeat("&<>", 1000)
	res := &nsjail.Result{Message: amp, Network: []netproxy.Attempt{{Reason: amp}},
		NetworkSummary: &netproxy.Summary{Attempts: 3, RateLimited: 2}, NetworkTruncated: true}
	line, err := encode(FromResult(res, false))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(line, []byte(`\u0026`)) || bytes.Count(line, []byte(amp)) != 2 {
		t.Errorf("& < > escaped or lost: %.200s", line)
	}
	if bytes.IndexByte(line, '\n') != len(line)-1 {
		t.Errorf("not one line ending in a newline")
	}
	if !bytes.Contains(line, []byte(`"network_truncated":true,"network_summary":{"attempts":3,`)) {
		t.Errorf("no network summary in %.300s", line[bytes.Index(line, []byte(`"output"`)):])
	}
}
