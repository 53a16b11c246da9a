package nsjail

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// statusLine is the value of one "Key:" line of a /proc status file.
func statusLine(t *testing.T, path, key string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	t.Fatalf("%s has no %s line", path, key)
	return ""
}

// TestBecomeOnChangesOneThread: onThread changes the effective ids of
// its own thread only, keeps that thread's capabilities, and leaves the
// process's other threads as they were (a broadcast setresuid would make
// every goroutine of sbx run as the sandbox's uid), the main thread
// included, which Go wedges rather than ends (before onThread kept off
// it, the process's Uid line showed the run's uid here).
func TestBecomeOnChangesOneThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root-run sbx changes the thread's ids")
	}
	before := statusLine(t, "/proc/self/status", "CapEff")
	// Several times: the goroutine lands on the main thread now and then.
	for i := range 20 {
		o := ownerFor(fmt.Sprintf("test-run-%d", i))
		type seen struct{ uid, gid, capEff string }
		got := make(chan seen, 1)
		errc := make(chan error, 1)
		go o.onThread(func(err error) {
			errc <- err
			if err != nil {
				return
			}
			got <- seen{
				statusLine(t, "/proc/thread-self/status", "Uid"),
				statusLine(t, "/proc/thread-self/status", "Gid"),
				statusLine(t, "/proc/thread-self/status", "CapEff"),
			}
		})
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		s := <-got
		wantUID := "0 " + strconv.Itoa(o.uid) + " 0 " + strconv.Itoa(o.uid)
		wantGID := "0 " + strconv.Itoa(o.gid) + " 0 " + strconv.Itoa(o.gid)
		if s.uid != wantUID || s.gid != wantGID {
			t.Errorf("the thread's ids: Uid %q, Gid %q; want %q, %q", s.uid, s.gid, wantUID, wantGID)
		}
		if s.capEff != before {
			t.Errorf("the thread's CapEff %s, want %s kept (SECBIT_NO_SETUID_FIXUP)", s.capEff, before)
		}
		// The main thread, whose ids are the process's, is untouched.
		if u := statusLine(t, "/proc/self/status", "Uid"); u != "0 0 0 0" {
			t.Fatalf("run %d: the process's Uid is %q after onThread, want 0 0 0 0", i, u)
		}
	}
}
