//go:build integration

package tests

import (
	"reflect"
	"testing"
)

// Compatibility under strict (issue 11): each sandbox has a devpts of its
// own, so os.openpty() and pty.spawn work, the host's ptys stay unseen,
// and TIOCSTI stays refused on both ends of a pty, in both profiles.
func TestPtyInSandbox(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, profile := range []string{"standard", "strict"} {
			var got struct {
				PtsBefore     []string `json:"pts_before"`
				TTYName       string   `json:"ttyname"`
				IsATTY        bool     `json:"isatty"`
				Echo          string   `json:"echo"`
				TIOCSTISlave  string   `json:"tiocsti_slave"`
				TIOCSTIMaster string   `json:"tiocsti_master"`
				SpawnOutput   string   `json:"spawn_output"`
				SpawnStatus   int      `json:"spawn_status"`
			}
			res := r.okResult(t, &got, "--profile", profile, data("pty_probe.py"))
			if !reflect.DeepEqual(got.PtsBefore, []string{"ptmx"}) {
				t.Errorf("%s: /dev/pts holds %v before the first openpty, want only ptmx (a private instance)", profile, got.PtsBefore)
			}
			if got.TTYName != "/dev/pts/0" || !got.IsATTY || got.Echo != "ping\n" {
				t.Errorf("%s: openpty gave %q (isatty %v), echo %q; want /dev/pts/0 and the line back", profile, got.TTYName, got.IsATTY, got.Echo)
			}
			if got.SpawnStatus != 0 || got.SpawnOutput != "/dev/pts/1\r\nspawned\r\n" {
				t.Errorf("%s: pty.spawn: status %d, output %q", profile, got.SpawnStatus, got.SpawnOutput)
			}
			if got.TIOCSTISlave != "EPERM" || got.TIOCSTIMaster != "EPERM" {
				t.Errorf("%s: TIOCSTI on the slave: %s, on the master: %s; want EPERM from the filter", profile, got.TIOCSTISlave, got.TIOCSTIMaster)
			}
			denied := false
			for _, d := range res.SeccompDenials {
				denied = denied || d.Syscall == "ioctl"
			}
			if !denied {
				t.Errorf("%s: the filter recorded no ioctl denial: %+v", profile, res.SeccompDenials)
			}
		}
	})
}
