package nsjail

import (
	"slices"
	"testing"

	"github.com/sbx-sandbox/sbx/rootfs"
)

// TestMountMarksNamedWhenTaken: the init's mount and /proc mask steps are
// marked by instant and named only when the marks are taken, the way
// the timeline printed them before (Mount.String), and a step not done
// (a /proc file that is missing, the steps after a failure) has no mark.
func TestMountMarksNamedWhenTaken(t *testing.T) {
	mounts := []rootfs.Mount{
		{Kind: rootfs.KindBind, Src: "/usr", Dst: "/usr"},
		{Kind: rootfs.KindTmpfs, Dst: "/tmp"},
		{Kind: rootfs.KindSymlink, Src: "usr/bin", Dst: "/bin"},
	}
	d := newMountMarks(mounts)
	d.done(0)
	d.done(2)
	got := d.appendTo([]Mark{{Name: "init: read spec", NS: 1}})
	names := make([]string, len(got))
	for i, m := range got {
		names[i] = m.Name
	}
	want := []string{"init: read spec", "  " + mounts[0].String(), "  " + mounts[2].String()}
	if !slices.Equal(names, want) {
		t.Fatalf("marks %q, want %q", names, want)
	}
	if names[1] != "  bind /usr -> /usr" || names[2] != "  symlink usr/bin -> /bin" {
		t.Errorf("names %q: not the timeline's", names[1:])
	}
	if got[1].NS == 0 || got[2].NS < got[1].NS {
		t.Errorf("instants %d, %d: want the order the steps were done in", got[1].NS, got[2].NS)
	}
	var none mountMarks
	if m := none.appendTo(nil); len(m) != 0 {
		t.Errorf("no steps: %d marks", len(m))
	}
}
