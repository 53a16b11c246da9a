package cgroup

import (
	"testing"
	"time"
)

// TestPrefetchCachesTheLayout: Prefetch discovers the layout on its own
// goroutine and leaves it where New, Probe and CleanupStale take it
// (`sbx exec` calls it from main, so that the discovery overlaps the CLI).
func TestPrefetchCachesTheLayout(t *testing.T) {
	layoutMu.Lock()
	cachedLayout = nil
	layoutMu.Unlock()
	Prefetch()
	deadline := time.Now().Add(time.Minute)
	var got *layout
	for got == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		layoutMu.Lock()
		got = cachedLayout
		layoutMu.Unlock()
	}
	if got == nil {
		t.Fatal("no layout cached a minute after Prefetch")
	}
	l, err := currentLayout()
	if err != nil {
		t.Fatal(err)
	}
	if l != got {
		t.Error("currentLayout discovered the layout again after Prefetch")
	}
}
