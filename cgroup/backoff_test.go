package cgroup

import (
	"testing"
	"time"
)

// TestBackoff checks the delays double up to the cap, and that the poll
// expires once its time is up, not before.
func TestBackoff(t *testing.T) {
	b := newBackoff(time.Hour, time.Microsecond, 5*time.Microsecond)
	var got []time.Duration
	for range 5 {
		got = append(got, b.delay)
		b.sleep()
	}
	want := []time.Duration{1, 2, 4, 5, 5}
	for i := range want {
		if got[i] != want[i]*time.Microsecond {
			t.Fatalf("delays %v, want %v µs", got, want)
		}
	}
	if b.expired() {
		t.Error("an hour's poll expired at once")
	}
	if !newBackoff(-time.Nanosecond, time.Microsecond, time.Microsecond).expired() {
		t.Error("a poll past its deadline is not expired")
	}
}
