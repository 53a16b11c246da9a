package main

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// writeResult's output is byte for byte encoding/json's indentation of
// the whole Result, for outputs around and above the splice threshold and
// for every kind of byte a payload may print: quotes, backslashes, HTML
// characters, control bytes, U+2028, invalid UTF-8, and the markers' own
// prefixes (issue 13).
func TestWriteResultIsIndentedJSON(t *testing.T) {
	tricky := "\"\\<>&\x00\x01\x1f\u2028\u2029\xff\xfe é 中 sbx-stdout- sbx-stderr-\"sbx-stdout-\"\n\t\r"
	rnd := rand.New(rand.NewSource(1))
	random := func(n int) string {
		b := make([]byte, n)
		rnd.Read(b)
		return string(b)
	}
	base := func() *nsjail.Result {
		r := nsjail.SetupFailure("0123456789abcdef01234567", "strict", errors.New("x"))
		r.Status, r.ExitCode, r.Message = nsjail.StatusExit, 3, ""
		r.StartedAt = time.Date(2026, 12, 1, 18, 0, 0, 123456789, time.UTC)
		r.FinishedAt = r.StartedAt.Add(time.Second)
		r.Warnings = []string{"a warning with " + tricky}
		r.Files = []nsjail.FileEntry{{Path: "out/" + tricky, Kind: "file"}}
		return r
	}
	cases := []struct {
		name           string
		stdout, stderr string
	}{
		{"empty", "", ""},
		{"small", "hello\n", "warn\n"},
		{"at the threshold", strings.Repeat("x", resultSpliceMin), ""},
		{"just below", strings.Repeat("x", resultSpliceMin-1), ""},
		{"stderr only", "", strings.Repeat(tricky, 2000)},
		{"both large, tricky", strings.Repeat(tricky, 3000), strings.Repeat("<&>", 20000)},
		{"random bytes", random(200 << 10), random(50 << 10)},
		{"one megabyte", strings.Repeat("0123456789abcdef", 1<<16), "y"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			r.Stdout, r.Stderr = tc.stdout, tc.stderr
			var want, got bytes.Buffer
			if err := encodeIndented(&want, r); err != nil {
				t.Fatal(err)
			}
			if err := writeResult(&got, r); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				i := 0
				for i < got.Len() && i < want.Len() && got.Bytes()[i] == want.Bytes()[i] {
					i++
				}
				t.Fatalf("differs from encoding/json's indentation at byte %d of %d (want %d):\ngot  %.200q\nwant %.200q", i, got.Len(), want.Len(), got.Bytes()[i:], want.Bytes()[i:])
			}
			if r.Stdout != tc.stdout || r.Stderr != tc.stderr {
				t.Error("writeResult changed the Result")
			}
		})
	}
}
