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

// TestSlowest: the packages' times, then the slowest top-level tests by
// their own Elapsed, or their longest subtest's when that is longer
// (parallel subtests), with their share of the sum.
func TestSlowest(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"pass","Test":"TestA/root","Elapsed":0.5}`,
		`{"Action":"pass","Test":"TestA","Elapsed":1}`,
		// Parallel subtests: go test says the parent took 0.00s.
		`{"Action":"pass","Test":"TestD/root","Elapsed":7}`,
		`{"Action":"pass","Test":"TestD/uid65534/deep","Elapsed":8}`,
		`{"Action":"pass","Test":"TestD/uid65534","Elapsed":8}`,
		`{"Action":"pass","Test":"TestD","Elapsed":0}`,
		`{"Action":"fail","Test":"TestB","Elapsed":6}`,
		`{"Action":"skip","Test":"TestC","Elapsed":3}`,
		`{"Action":"pass","Package":"example.com/tests","Elapsed":12.5}`,
	}, "\n")
	c := read(strings.NewReader(in), io.Discard)
	want := "took example.com/tests 12.5s; 4 tests 18.0s, the slowest: TestD 8.0s (44%), TestB 6.0s (33%)"
	if got := c.slowest(2); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := read(strings.NewReader(`--- PASS: TestA (0.00s)`), io.Discard).slowest(10); got != "" {
		t.Errorf("without go test -json: %q, want nothing", got)
	}
}
