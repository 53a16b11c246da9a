package nsjail

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Mark is a named instant on CLOCK_MONOTONIC, which the supervisor and the
// init share, so that one timeline spans both processes.
type Mark struct {
	Name string `json:"name"`
	NS   int64  `json:"ns"`
}

func monotonicNS() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// timeline collects marks when enabled; the zero value records nothing.
// The supervisor marks from several goroutines at once (the attach, the
// filter compile, the status reader), so appends are locked; a -race build
// with --debug-timings reported the unlocked version.
type timeline struct {
	// on is atomic: a sandbox started without timings turns them on at
	// Exec (IO.Timings) while its goroutines may be marking.
	on    atomic.Bool
	mu    sync.Mutex
	marks []Mark
}

func (t *timeline) mark(name string) {
	if t.on.Load() {
		t.add([]Mark{{name, monotonicNS()}})
	}
}

func (t *timeline) add(ms []Mark) {
	if !t.on.Load() {
		return
	}
	t.mu.Lock()
	t.marks = append(t.marks, ms...)
	t.mu.Unlock()
}

// print writes one line per mark, in time order: time since the first,
// and the step's own duration (since the mark before it). The init's
// marks arrive in batches and some overlap the supervisor's (the /proc
// masks run while the cgroup is attached), so they are sorted first.
func (t *timeline) print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.marks) == 0 {
		return
	}
	sort.SliceStable(t.marks, func(i, j int) bool { return t.marks[i].NS < t.marks[j].NS })
	t0 := t.marks[0].NS
	prev := t0
	fmt.Fprintf(w, "[sbx:timings] %8s %8s  %s\n", "at ms", "step ms", "step")
	for _, m := range t.marks {
		fmt.Fprintf(w, "[sbx:timings] %8.2f %8.2f  %s\n", float64(m.NS-t0)/1e6, float64(m.NS-prev)/1e6, m.Name)
		prev = m.NS
	}
}
