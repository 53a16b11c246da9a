//go:build integration

package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// launch starts cmd as a `sbx serve` and waits for its "listening on"
// line; the server is drained (SIGTERM) at the test's end.
func launch(t *testing.T, cmd *exec.Cmd, token, tmp string) *server {
	t.Helper()
	s := &server{t: t, cmd: cmd, token: token, tmp: tmp, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	s.base = "http://" + startListening(t, cmd, s.stderr, s.exited)
	t.Cleanup(func() { s.stop() })
	return s
}

// activated starts `sbx serve ARGS` the way systemd starts sbx.service
// from sbx.socket: the listening socket ln at fd 3, LISTEN_FDS=1 and
// LISTEN_PID the pid of the process that execs sbx (sh's $$: exec keeps
// the pid, as systemd sets LISTEN_PID between fork and exec).
func activated(t *testing.T, r runner, ln *net.TCPListener, args ...string) *server {
	t.Helper()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := ownedDir(t, r)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	os.Chown(tmp, r.uid, r.uid)
	return activatedIn(t, r, f, tmp, args...)
}

// activatedIn is activated with the listening socket's file f and the
// server's TMPDIR tmp given (a node restarted in the same TMPDIR).
func activatedIn(t *testing.T, r runner, f *os.File, tmp string, args ...string) *server {
	t.Helper()
	inner := r.command(append([]string{"serve"}, args...)...)
	cmd := exec.Command("sh", append([]string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=sbx.socket; exec "$@"`, "sh"}, inner.Args...)...)
	cmd.Path, _ = exec.LookPath("sh")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.ExtraFiles = []*os.File{f}
	return launch(t, cmd, "", tmp)
}

// socketFDs lists pid's fds that are the socket whose inode is ino, with
// whether each is close-on-exec.
func socketFDs(pid int, ino uint64) map[int]bool {
	out := map[int]bool{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join(dir, e.Name())); l == fmt.Sprintf("socket:[%d]", ino) {
			fd, _ := strconv.Atoi(e.Name())
			info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
			cloexec := false
			for _, line := range strings.Split(string(info), "\n") {
				if v, ok := strings.CutPrefix(line, "flags:"); ok {
					fl, _ := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
					cloexec = fl&syscall.O_CLOEXEC != 0
				}
			}
			out[fd] = cloexec
		}
	}
	return out
}

// TestServeSocketActivation: `sbx serve` started with a listening socket
// at fd 3 and LISTEN_FDS/LISTEN_PID (sd_listen_fds(3); systemd's
// sbx.socket) serves on that socket, not on --listen's default; it holds
// the socket once, close-on-exec (no sandbox inherits it), hides the
// LISTEN_* variables from its runs, and drains on SIGTERM as usual. The
// same with --listen given too is an error naming both.
func TestServeSocketActivation(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var st syscall.Stat_t
		f, _ := ln.File()
		syscall.Fstat(int(f.Fd()), &st)
		f.Close()
		s := activated(t, r, ln)
		if want := "http://" + ln.Addr().String(); s.base != want {
			t.Fatalf("sbx serve listens on %s, want the passed socket %s\n%s", s.base, want, s.stderr)
		}
		// From here on only sbx holds the socket: a request that is
		// answered was accepted by sbx.
		ln.Close()
		res, _ := s.exec(map[string]any{"code": "import os; print(os.environ.get('LISTEN_FDS'), os.environ.get('LISTEN_PID'))"})
		if res.Status != nsjail.StatusOK || strings.TrimSpace(res.Stdout) != "None None" {
			t.Errorf("a run on the passed socket: %s %q %s", res.Status, res.Stdout, res.Message)
		}
		fds := socketFDs(s.cmd.Process.Pid, st.Ino)
		if len(fds) != 1 {
			t.Errorf("sbx holds the passed socket at fds %v, want exactly one", fds)
		}
		for fd, cloexec := range fds {
			if !cloexec {
				t.Errorf("the passed socket is at fd %d without close-on-exec: a sandbox's init would inherit it", fd)
			}
		}
		if err := s.stop(); err != nil {
			t.Errorf("sbx serve after SIGTERM: %v\n%s", err, s.stderr)
		}

		ln2, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer ln2.Close()
		f2, _ := ln2.File()
		defer f2.Close()
		inner := r.command("serve", "--listen", "127.0.0.1:0")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"`, "sh"}, inner.Args...)...)
		cmd.ExtraFiles = []*os.File{f2}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--listen 127.0.0.1:0 and a socket passed in LISTEN_FDS") {
			t.Errorf("--listen with LISTEN_FDS: %v %s", err, out)
		}
	})
}

// TestDeployConfinement: what the systemd unit (User=sbx,
// NoNewPrivileges=yes, an empty CapabilityBoundingSet=) and the Kubernetes
// pod (runAsUser 65534, allowPrivilegeEscalation: false, capabilities
// drop ALL) leave sbx is enough: as uid 65534 with no_new_privs and an
// empty bounding set, sbx serve builds sandboxes and runs a payload. Only
// the uid 65534 case applies: root needs CAP_SETUID to map the sandbox's
// uid to an unprivileged host uid, and neither deployment runs sbx as root.
func TestDeployConfinement(t *testing.T) {
	r := runner{"uid65534", nobody}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start sbx as uid 65534 with setpriv")
	}
	requireUserNS(t, r)
	dir := ownedDir(t, r)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	os.Chown(tmp, r.uid, r.uid)
	cmd := exec.Command("setpriv", "--no-new-privs", "--bounding-set", "-all", "--inh-caps", "-all",
		fmt.Sprintf("--reuid=%d", r.uid), fmt.Sprintf("--regid=%d", r.uid), "--clear-groups",
		sbxBin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	s := launch(t, cmd, "", tmp)
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	for _, want := range []string{"CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "CapEff:\t0000000000000000"} {
		if !strings.Contains(string(status), want) {
			t.Fatalf("sbx serve is not confined as the deployments confine it: no %q in\n%s", want, status)
		}
	}
	res, _ := s.exec(map[string]any{"code": "import pandas, os; print(os.getuid(), len(pandas.DataFrame({'a': [1, 2]})))"})
	if res.Status != nsjail.StatusOK || strings.TrimSpace(res.Stdout) != "1000 2" {
		t.Errorf("a run under no_new_privs and no capability: %s %q %q %s", res.Status, res.Stdout, res.Stderr, res.Message)
	}
}
