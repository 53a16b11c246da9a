//go:build integration

package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestInitMemfdCopyProcess: the sbx-init memfd of an `sbx exec` is
// filled by a process that sbx's C constructor forked before Go's runtime
// started (internal/initbin, ctorcopy.go; issue 13), and that process
// leaves nothing behind: --debug-timings names it, and while a payload
// holds the sandbox sbx's only child is its init (the copy process was
// reaped), sbx holds the memfd once, at fd 100 or above, and no fd of its
// own file (the constructor's /proc/self/exe) any more. Under a child
// subreaper (prctl(2) PR_SET_CHILD_SUBREAPER), which would inherit a copy
// process sbx had not reaped, neither a run nor an `sbx exec` that fails
// at its flags, before any sandbox, leaves a process or zombie. As root
// and as uid 65534. A sbx started with fd 0 closed still gets /dev/null
// there, as before: the constructor's fds stay off 0-2.
func TestInitMemfdCopyProcess(t *testing.T) {
	self, err := filepath.EvalSymlinks(sbxBin)
	if err != nil {
		t.Fatal(err)
	}
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--profile", "strict", "--debug-timings", "--", "/bin/true")
		want := "sbx: sbx-init memfd sealed (sendfile from /proc/self/exe, by a process the C constructors forked)\n"
		if out.code != 0 || !strings.Contains(out.stderr, want) {
			t.Fatalf("exit %d; want the timeline to have %q:\n%s", out.code, want, out.stderr)
		}

		cmd, stdout, se := startHeld(t, r, "--", "/usr/bin/python3", "-S", "-c", "import time; print('up', flush=True); time.sleep(60)")
		if line, err := stdout.ReadString('\n'); err != nil || line != "up\n" {
			t.Fatalf("payload: %q %v; sbx stderr %s", line, err, se.String())
		}
		sbxPid := sbxProcess(t, cmd.Process.Pid)
		childOf(t, sbxPid) // the init alone: no copy process, live or zombie
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", sbxPid))
		if err != nil {
			t.Fatal(err)
		}
		var memfds []string
		for _, e := range ents {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", sbxPid, e.Name()))
			if err != nil {
				continue
			}
			if strings.HasPrefix(l, "/memfd:sbx-init") {
				memfds = append(memfds, e.Name())
			}
			if l == self {
				t.Errorf("sbx (pid %d) still holds fd %s of its own file %s", sbxPid, e.Name(), l)
			}
		}
		if len(memfds) != 1 || len(memfds[0]) < 3 {
			t.Errorf("sbx (pid %d) holds the sbx-init memfd at fds %v, want one fd >= 100", sbxPid, memfds)
		}

		// A sbx started with its stdin closed: the constructor's fds must
		// not take fd 0, which Go's runtime would then not fill with
		// /dev/null, and which later opens would reuse under os.Stdin.
		c := r.command("exec", "--", "/usr/bin/python3", "-S", "-c", "import time; print('up', flush=True); time.sleep(60)")
		closed := exec.Command("/bin/sh", append([]string{"-c", `exec 0<&- "$@"`, "sh", c.Path}, c.Args[1:]...)...)
		so, err := closed.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := closed.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { closed.Process.Signal(syscall.SIGTERM); closed.Wait() }()
		if line, err := bufio.NewReader(so).ReadString('\n'); err != nil || line != "up\n" {
			t.Fatalf("payload of sbx with stdin closed: %q %v", line, err)
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", sbxProcess(t, closed.Process.Pid))); l != "/dev/null" {
			t.Errorf("sbx started with fd 0 closed has fd 0 on %q (%v), want /dev/null (Go's runtime.checkfds)", l, err)
		}

		for _, args := range [][]string{
			{"exec", "--profile", "strict", "--", "/bin/true"},
			{"exec", "--no-such-flag", "--", "/bin/true"},
		} {
			c := r.command(args...)
			sub := exec.Command("/usr/bin/python3", append([]string{"-S", "-c", subreaperScript, c.Path}, c.Args[1:]...)...)
			got, err := sub.CombinedOutput()
			if err != nil {
				t.Errorf("sbx %v under a subreaper: %v\n%s", args, err, got)
			}
		}
	})
}

// subreaperScript makes itself a child subreaper, runs argv, and fails if
// any process was left to it once sbx has exited and been reaped: an
// orphan is reparented in its parent's exit (kernel/exit.c,
// forget_original_parent), before the parent can be reaped, and
// __WALL (0x40000000) also finds a child without an exit signal.
const subreaperScript = `
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER): errno %d" % ctypes.get_errno())
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
left = []
for t in os.listdir("/proc/self/task"):
    left += open("/proc/self/task/%s/children" % t).read().split()
try:
    while True:
        pid, st = os.waitpid(-1, os.WNOHANG | 0x40000000)
        if pid == 0:
            break
        left.append("%d (reaped, status %#x)" % (pid, st))
except ChildProcessError:
    pass
if left:
    sys.exit("exit %d; processes left: %s; stderr: %s" % (p.returncode, left, p.stderr.decode()[-500:]))
`

// TestInitMemfdCopyProcessOnImage: an `sbx exec --image` leaves no copy
// process to a subreaper either. The lean sbx hands a run on an image to
// the full sbx it embeds (internal/fullbin, an execveat of the same
// process), after its own constructor started its copy: fullbin.Exec
// reaps that first, or the full sbx, which knows nothing of it, kept it
// as a zombie (a trial merge with the image hand-off found one, as root
// and as uid 65534, without it). Where this build runs images itself the
// run reaps its copy as any other.
func TestInitMemfdCopyProcessOnImage(t *testing.T) {
	reg := startRegistry(t)
	ref, _ := reg.push(t, "t/ctorcopy-python:v1", buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t)))
	forEach(t, func(t *testing.T, r runner) {
		imageProfile(t, r, ref) // pulled into a store of r's, SBX_HOME
		if out := r.exec(t, "", "exec", "--image", ref, "-c", "print('on the image')"); out.code != 0 || out.stdout != "on the image\n" {
			t.Fatalf("exec --image: exit %d: %s%s", out.code, out.stdout, out.stderr)
		}
		c := r.command("exec", "--image", ref, "-c", "pass")
		sub := exec.Command("/usr/bin/python3", append([]string{"-S", "-c", subreaperScript, c.Path}, c.Args[1:]...)...)
		if got, err := sub.CombinedOutput(); err != nil {
			t.Errorf("sbx exec --image under a subreaper: %v\n%s", err, got)
		}
	})
}
