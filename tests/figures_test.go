//go:build integration

package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// plotScript shows one figure and leaves another open: two PNGs.
const plotScript = `import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])
plt.show()
plt.figure(figsize=(3, 2))
plt.plot([1, 2])
print("plotted")
`

// forgeScript writes what the runner's report looks like (a figure
// record with a well-formed 1x1 PNG) on every fd it can, and sends it to
// every report address /proc/net/unix lists; it plots nothing.
const forgeScript = `import os, socket, struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")
rec = b"f" + len(png).to_bytes(4, "big") + png
for fd in range(1024):
    try:
        os.write(fd, rec)
    except OSError:
        pass
sent = 0
for a in open("/proc/net/unix").read().split():
    if a.startswith("@sbx-report-"):
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + a[1:])
        s.sendall(rec)
        s.close()
        sent += 1
print("sent", sent)
`

// checkPNG says what is wrong with b as a PNG: its signature, then an
// IHDR chunk of 13 bytes with a non-zero width and height (RFC 2083).
func checkPNG(t *testing.T, what string, b64 string) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("%s: png is not base64: %v", what, err)
	}
	if len(b) < 33 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s: no PNG signature: % x", what, b[:min(len(b), 16)])
	}
	if binary.BigEndian.Uint32(b[8:12]) != 13 || string(b[12:16]) != "IHDR" {
		t.Fatalf("%s: the first chunk is not IHDR: % x", what, b[8:16])
	}
	if w, h := binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint32(b[20:24]); w < 100 || h < 100 {
		t.Errorf("%s: a %dx%d figure", what, w, h)
	}
}

// wantFigures checks a Result of plotScript: two PNG results, nothing
// else in them, the output untouched.
func wantFigures(t *testing.T, what string, res *nsjail.Result) {
	t.Helper()
	if res.Status != nsjail.StatusOK || res.Stdout != "plotted\n" {
		t.Fatalf("%s: status %s, stdout %q, stderr %q", what, res.Status, res.Stdout, res.Stderr)
	}
	if len(res.Results) != 2 || res.ResultsTruncated {
		t.Fatalf("%s: %d results (truncated %v), want the shown and the open figure", what, len(res.Results), res.ResultsTruncated)
	}
	for _, b := range res.Results {
		if b.Text != "" || b.HTML != "" || b.IsMainResult {
			t.Errorf("%s: a figure's bundle has more than a png: %+v", what, b)
		}
		checkPNG(t, what, b.PNG)
	}
}

// TestExecCaptureFigures: with capture_figures (the data profile), a
// script's shown and open figures are PNGs in the Result's results, from
// sbx exec and from POST /v1/exec, cold and pooled; without it none. A
// payload that writes the runner's records on every fd and to the
// report's address injects nothing.
func TestExecCaptureFigures(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		res, _ := r.result(t, "--profile", "data", "--", "python3", "-c", plotScript)
		wantFigures(t, "sbx exec --profile data", res)
		if res, _ := r.result(t, "--", "python3", "-c", plotScript); len(res.Results) != 0 || res.Status != nsjail.StatusOK {
			t.Errorf("capture_figures off (standard): %d results, status %s", len(res.Results), res.Status)
		}
		// The output cap holds: a 30 KB cap keeps the first ~20 KB figure.
		res, _ = r.result(t, "--profile", "data", "--output-limit", "30K", "--", "python3", "-c", plotScript+"plt.figure(dpi=300)\nplt.plot([5, 1])\n")
		if len(res.Results) != 1 || !res.ResultsTruncated {
			t.Errorf("three figures under a 30K output cap: %d results, truncated %v; want 1 and true (%v)", len(res.Results), res.ResultsTruncated, res.Warnings)
		}
		// An uncaught exception: the error and the figure.
		res, _ = r.result(t, "--profile", "data", "--", "python3", "-c", "import matplotlib.pyplot as plt\nplt.plot([1])\n1/0")
		if res.Error == nil || res.Error.Name != "ZeroDivisionError" || len(res.Results) != 1 {
			t.Errorf("a plot, then 1/0: error %+v, %d results", res.Error, len(res.Results))
		}
		for _, profile := range []string{"standard", "data"} {
			res, _ := r.result(t, "--profile", profile, "--", "python3", "-c", forgeScript)
			if res.Status != nsjail.StatusOK || res.Stdout[len(res.Stdout)-7:] != "sent 1\n" {
				t.Fatalf("forger (%s): %s, stdout %q, stderr %q: want it to reach the report's address", profile, res.Status, res.Stdout, res.Stderr)
			}
			if len(res.Results) != 0 || res.ResultsTruncated {
				t.Errorf("forger (%s): %d results injected (%+v)", profile, len(res.Results), res.Results)
			}
		}

		s := startServe(t, r, "", "--pool", "data=1")
		s.waitIdle("data", 1)
		pooled, _ := s.exec(map[string]any{"profile": "data", "code": plotScript})
		if !pooled.Pooled {
			t.Errorf("the first data request was not pooled")
		}
		wantFigures(t, "POST /v1/exec, pooled", &pooled.Result)
		// The pool's one sandbox is taken: a second request at once runs
		// cold, unless the pool refilled already.
		cold, _ := s.exec(map[string]any{"profile": "data", "code": plotScript, "limits": map[string]any{"workspace_size": "64M"}})
		if cold.Pooled {
			t.Errorf("a lowered workspace_size ran pooled")
		}
		wantFigures(t, "POST /v1/exec, cold", &cold.Result)
		s.waitIdle("data", 1)
		forged, _ := s.exec(map[string]any{"profile": "data", "code": forgeScript})
		if !forged.Pooled || len(forged.Results) != 0 {
			t.Errorf("pooled forger: pooled %v, %d results injected", forged.Pooled, len(forged.Results))
		}
	})
}
