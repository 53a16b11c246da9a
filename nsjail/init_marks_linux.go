package nsjail

import "github.com/sbx-sandbox/sbx/rootfs"

// mountMarks are the instants at which the steps of a list of mounts (the
// mount plan, the /proc masks) were done, named only when the marks are
// sent. The init keeps its marks until the payload says whether it wants
// them (Payload.Timings), so it used to format every step's name
// (Mount.String: fmt.Sprintf) on its way to the payload, 69 of them for
// strict, timings wanted or not: 77 µs in a fresh process against 33 µs
// for the instants alone (medians of 61 runs), and "sbx: got ready" came
// 0.085-0.115 ms sooner without the names (SCHED_FIFO, 100 interleaved
// rounds; issue 13, "The init's start, sixth pass" in docs/DESIGN.md).
// A step's instant is still taken when it is done; only its name waits,
// and is made once the payload has started (takeMarks), or never.
type mountMarks struct {
	mounts []rootfs.Mount
	// ns[i] is when mounts[i] was done, 0 for one that was not (a
	// missing /proc file left unmasked, or the steps after a failure).
	ns []int64
}

func newMountMarks(mounts []rootfs.Mount) mountMarks {
	return mountMarks{mounts: mounts, ns: make([]int64, len(mounts))}
}

// done records that mounts[i] is done, now.
func (d *mountMarks) done(i int) {
	d.ns[i] = monotonicNS()
}

// appendTo appends a mark for each step done, named as the timeline
// shows it ("  bind /usr -> /usr"), in the list's order; the supervisor
// sorts the marks by time before it prints them (timeline.print).
func (d *mountMarks) appendTo(marks []Mark) []Mark {
	for i, ns := range d.ns {
		if ns != 0 {
			marks = append(marks, Mark{Name: "  " + d.mounts[i].String(), NS: ns})
		}
	}
	return marks
}
