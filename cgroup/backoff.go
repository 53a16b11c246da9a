package cgroup

import "time"

// backoff paces a poll of the cgroup filesystem: a first short sleep,
// doubling up to a cap, until a deadline. The kernel gives no event for
// what these polls wait for (a task leaving, a freeze completing, an
// rmdir no longer EBUSY), and most waits end within the first few
// sleeps, so the first is microseconds and the cap a few milliseconds.
type backoff struct {
	deadline   time.Time
	delay, max time.Duration
}

// newBackoff starts a poll that may last wait, sleeping first, then
// twice as long each time up to max.
func newBackoff(wait, first, max time.Duration) *backoff {
	return &backoff{deadline: time.Now().Add(wait), delay: first, max: max}
}

// expired reports whether the poll's time is up.
func (b *backoff) expired() bool { return time.Now().After(b.deadline) }

// sleep waits the next delay.
func (b *backoff) sleep() {
	time.Sleep(b.delay)
	b.delay = min(2*b.delay, b.max)
}
