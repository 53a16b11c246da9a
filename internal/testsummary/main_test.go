package main

import (
	"io"
	"strings"
	"testing"
)

// TestCounts: each test counts once per runner subtest, a test without
// them once at the top level; JSON and -v text count alike.
func TestCounts(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Test":"TestA/root","Output":"    --- PASS: TestA/root (0.01s)\n"}`,
		`{"Action":"output","Test":"TestA/uid65534","Output":"    --- SKIP: TestA/uid65534 (0.01s)\n"}`,
		`{"Action":"output","Test":"TestA/uid65534/deep","Output":"        --- FAIL: TestA/uid65534/deep (0.01s)\n"}`,
		`{"Action":"output","Test":"TestA","Output":"--- PASS: TestA (0.02s)\n"}`,
		`{"Action":"pass","Test":"TestA","Elapsed":0.02}`,
		`--- FAIL: TestB (0.00s)`,
		`    --- PASS: TestC/root (0.00s)`,
	}, "\n")
	got := read(strings.NewReader(in), io.Discard).String()
	want := "as root 2 passed, 0 failed, 0 skipped; as uid 65534 0 passed, 0 failed, 1 skipped; not per user 0 passed, 1 failed, 0 skipped"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
