//go:build integration

package tests

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The --json Result is exactly encoding/json's two-space indentation of
// itself, HTML not escaped, when the payload prints hundreds of KiB of
// every kind of byte: quotes, backslashes, < > &, control bytes, U+2028
// and invalid UTF-8. sbx splices the streams into an indented skeleton
// instead of indenting them (output.go, issue 13); the bytes must not
// differ from the whole-Result indentation, nor the streams from what the
// payload wrote (invalid UTF-8 read as U+FFFD, as before).
func TestResultJSONIndentedWithBulkyOutput(t *testing.T) {
	chunk := "q\"b\\l<t>g&\x01\x1f\u2028é中\xff\xfe\n"
	code := `import sys
chunk = ` + pyBytes(chunk) + `
sys.stdout.buffer.write(chunk * 12000)
sys.stderr.buffer.write(b"E" + chunk * 3000)
`
	wantOut := strings.ToValidUTF8(strings.Repeat(chunk, 12000), "\uFFFD")
	wantErr := strings.ToValidUTF8("E"+strings.Repeat(chunk, 3000), "\uFFFD")
	forEach(t, func(t *testing.T, r runner) {
		res, out := r.result(t, "--output-limit", "4M", "--", "/usr/bin/python3", "-S", "-c", code)
		if res.Status != "ok" {
			t.Fatalf("status %s (%s), stderr: %s", res.Status, res.Message, out.stderr)
		}
		if res.Stdout != wantOut || res.Stderr != wantErr {
			t.Errorf("streams changed: stdout %d bytes (want %d), stderr %d (want %d)", len(res.Stdout), len(wantOut), len(res.Stderr), len(wantErr))
		}
		var compact, indented bytes.Buffer
		if err := json.Compact(&compact, []byte(out.stdout)); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		indented.WriteByte('\n')
		if got := out.stdout; got != indented.String() {
			i := 0
			for i < len(got) && i < indented.Len() && got[i] == indented.String()[i] {
				i++
			}
			t.Fatalf("stdout is not encoding/json's indentation: differs at byte %d of %d: %.120q", i, len(got), got[i:])
		}
		if strings.Contains(out.stdout, `\u003c`) || strings.Contains(out.stdout, `\u0026`) || !utf8.ValidString(out.stdout) {
			t.Errorf("HTML escaped or invalid UTF-8 in the Result")
		}
	})
}

// pyBytes is s as a Python bytes literal.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString(`b"`)
	for i := 0; i < len(s); i++ {
		b.WriteString(`\x`)
		b.WriteString("0123456789abcdef"[s[i]>>4 : s[i]>>4+1])
		b.WriteString("0123456789abcdef"[s[i]&15 : s[i]&15+1])
	}
	b.WriteString(`"`)
	return b.String()
}
