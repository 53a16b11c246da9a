package nsjail

import (
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/rootfs"
)

func hostPlan(t *testing.T, workspace string) []rootfs.Mount {
	t.Helper()
	plan, err := rootfs.Plan(rootfs.Options{Workspace: workspace, WorkspaceSize: 1, WorkspaceInodes: 1, TmpSize: 1, TmpInodes: 1, ShmSize: 1,
		ROBinds:  []string{"/usr/share"},
		Identity: rootfs.Identity{UID: 1000, GID: 1000, Hostname: "sbx", Home: workspace}})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// What Landlock lets the payload write follows the mount plan: the
// tmpfs mounts made after the seal and the device nodes, never /dev
// itself, /proc, the rootfs or a read-only bind.
func TestLandlockWritableFollowsThePlan(t *testing.T) {
	p := landlockWritable(hostPlan(t, "/home/work"))
	dirs, devs := " "+strings.Join(p.Dirs, " ")+" ", " "+strings.Join(p.Devices, " ")+" "
	for _, want := range []string{"/dev/shm", "/tmp", "/home/work"} {
		if !strings.Contains(dirs, " "+want+" ") {
			t.Errorf("writable dirs %q: no %s", dirs, want)
		}
	}
	for _, not := range []string{"/", "/dev", "/proc", "/usr", "/usr/share", "/etc"} {
		if strings.Contains(dirs+devs, " "+not+" ") {
			t.Errorf("writable %q%q: %s must not be", dirs, devs, not)
		}
	}
	if !strings.Contains(devs, " /dev/null /dev/zero /dev/full /dev/random /dev/urandom ") {
		t.Errorf("writable devices %q", devs)
	}
	plan := []rootfs.Mount{
		{Kind: rootfs.KindTmpfs, Dst: "/early"}, // before the seal: read-only
		{Kind: rootfs.KindBind, Src: "/usr", Dst: "/usr"},
		{Kind: rootfs.KindSeal, Dst: "/"},
		{Kind: rootfs.KindTmpfs, Dst: "/sealed-later"},
		{Kind: rootfs.KindRemountRO, Dst: "/sealed-later"},
		{Kind: rootfs.KindProc, Dst: "/proc"},
		{Kind: rootfs.KindTmpfs, Dst: "/w"},
		{Kind: rootfs.KindDir, Dst: "/w/sub"},
		{Kind: "devpts", Dst: "/dev/pts"}, // a kind of mount added later
	}
	if p := landlockWritable(plan); strings.Join(p.Dirs, " ") != "/w /dev/pts" || len(p.Devices) != 0 {
		t.Errorf("landlockWritable = %+v, want /w and /dev/pts", p)
	}
}

func TestLandlockLayer(t *testing.T) {
	spec := &Spec{Landlock: true, Mounts: hostPlan(t, "/workspace")}
	for _, tc := range []struct {
		asked bool
		abi   int
		state LayerState
		want  string
	}{
		{false, 7, LayerOff, "landlock.mode off"},
		{true, 0, LayerDegraded, "not available"},
		{true, 1, LayerDegraded, "ABI 1 is not used"},
		{true, 4, LayerOn, "ABI 4: read and execute anywhere, write only in /dev/shm "},
		{true, 7, LayerOn, "/workspace and the 5 device nodes; signals and abstract unix sockets scoped"},
	} {
		spec.Landlock = tc.asked
		l := landlockLayer(spec, tc.abi)
		if l.State != tc.state || l.ABI != tc.abi || !strings.Contains(l.Detail, tc.want) || tc.abi == 4 && strings.Contains(l.Detail, "scoped") {
			t.Errorf("asked %v, ABI %d: %+v, want %s with %q", tc.asked, tc.abi, l, tc.state, tc.want)
		}
	}
}
