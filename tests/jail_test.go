//go:build integration

package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/nsjail"
)

func TestHello(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", data("hello.py"))
		if out.code != 0 || out.stdout != "hello from the sandbox\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the greeting", out.code, out.stdout, out.stderr)
		}
		res, out := r.result(t, "--profile", "strict", data("hello.py"))
		if res.Status != nsjail.StatusOK || res.ExitCode != 0 || out.code != 0 {
			t.Fatalf("status %s exit_code %d (sbx exit %d): %s", res.Status, res.ExitCode, out.code, res.Message)
		}
		if res.Stdout != "hello from the sandbox\n" || res.Profile != "strict" || res.ID == "" || res.Signal != nil {
			t.Fatalf("unexpected Result: %+v", res)
		}
		if res.FinishedAt.Before(res.StartedAt) || res.Usage.WallMS <= 0 || res.Usage.CPUMS <= 0 {
			t.Fatalf("implausible times or usage: %+v", res)
		}
	})
}

func TestExitCodes(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		res, out := r.result(t, data("exit3.py"))
		if res.Status != nsjail.StatusExit || res.ExitCode != 3 || out.code != 3 {
			t.Errorf("sys.exit(3): status %s exit_code %d, sbx exit %d; want exit/3/3", res.Status, res.ExitCode, out.code)
		}
		if plain := r.exec(t, "", "exec", data("exit3.py")); plain.code != 3 {
			t.Errorf("sys.exit(3) without --json: sbx exit %d, want 3", plain.code)
		}
		res, out = r.result(t, data("segv.py"))
		if res.Status != nsjail.StatusSignal || res.Signal == nil || *res.Signal != "SIGSEGV" || res.ExitCode != 139 || out.code != 139 {
			t.Errorf("SIGSEGV: status %s signal %v exit_code %d, sbx exit %d; want signal/SIGSEGV/139/139", res.Status, res.Signal, res.ExitCode, out.code)
		}
	})
}

func TestCommandMode(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--", "/usr/bin/python3", "-c", "import sys; print(sys.argv[1:])", "a", "--b")
		if out.code != 0 || out.stdout != "['a', '--b']\n" {
			t.Errorf("-- python3 -c: exit %d stdout %q stderr %q", out.code, out.stdout, out.stderr)
		}
		out = r.exec(t, "", "exec", "-c", "import sys; print(sys.argv[1:])", "x", "y")
		if out.code != 0 || out.stdout != "['x', 'y']\n" {
			t.Errorf("-c CODE ARGS: exit %d stdout %q stderr %q", out.code, out.stdout, out.stderr)
		}
		res, out := r.result(t, "--", "no-such-program")
		if res.ExitCode != nsjail.ExitNotFound || out.code != nsjail.ExitNotFound {
			t.Errorf("missing program: exit_code %d, sbx exit %d, want 127 (%s)", res.ExitCode, out.code, res.Message)
		}
		res, out = r.result(t, "--", "/etc/passwd")
		if res.ExitCode != nsjail.ExitCannotExec || out.code != nsjail.ExitCannotExec {
			t.Errorf("non-executable program: exit_code %d, sbx exit %d, want 126 (%s)", res.ExitCode, out.code, res.Message)
		}
	})
}

func TestStdinPassesThrough(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "hello stdin\n", "exec", "-c", "import sys; print(sys.stdin.read().upper(), end='')")
		if out.code != 0 || out.stdout != "HELLO STDIN\n" {
			t.Fatalf("exit %d stdout %q stderr %q", out.code, out.stdout, out.stderr)
		}
	})
}

func TestInputFiles(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var got map[string]string
		r.okResult(t, &got, "--file", data("hello.py")+":in/sub/copy.py", "--file", data("env.py"),
			"-c", "import json,os; print(json.dumps({p: open(p).read() for p in ['in/sub/copy.py', 'env.py']}))")
		want, _ := os.ReadFile(data("hello.py"))
		if got["in/sub/copy.py"] != string(want) || !strings.Contains(got["env.py"], "os.environ") {
			t.Fatalf("inputs not copied: %v", got)
		}
		for _, bad := range []string{"../escape.py", "/abs.py", "a/../../b"} {
			res, out := r.result(t, "--file", data("hello.py")+":"+bad, "-c", "pass")
			if res.Status != nsjail.StatusSetupError || out.code != nsjail.ExitSbxFailed {
				t.Errorf("--file DEST %q: status %s, sbx exit %d; want setup_error/125", bad, res.Status, out.code)
			}
		}
	})
}

func TestReadOnlyAndWritable(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var got map[string]string
		r.okResult(t, &got, data("fs_writes.py"))
		for path, res := range got {
			writable := strings.HasPrefix(path, "/workspace/") || strings.HasPrefix(path, "/tmp/") || strings.HasPrefix(path, "/dev/shm/")
			if writable && res != "ok" {
				t.Errorf("%s: %s, want writable", path, res)
			}
			if !writable && res == "ok" {
				t.Errorf("%s: writable, want a refusal", path)
			}
		}
		if len(got) != 9 {
			t.Errorf("probe checked %d paths, want 9: %v", len(got), got)
		}
	})
}

func TestTmpfsCaps(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, dir := range []string{"/workspace", "/tmp"} {
			var fill struct {
				Error   string `json:"error"`
				Written int64  `json:"written"`
			}
			r.okResult(t, &fill, "--profile", data("profiles/tiny.toml"), data("fill.py"), dir, "bytes")
			if fill.Error != "ENOSPC" || fill.Written > 4<<20 {
				t.Errorf("%s past 4M: %+v, want ENOSPC within 4M", dir, fill)
			}
			r.okResult(t, &fill, "--profile", data("profiles/tiny.toml"), data("fill.py"), dir, "inodes")
			if fill.Error != "ENOSPC" || fill.Written > 64 {
				t.Errorf("%s past 64 inodes: %+v, want ENOSPC within 64 files", dir, fill)
			}
		}
	})
}

func TestIsolation(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var got struct {
			Visible     map[string]bool   `json:"visible"`
			RootEntries []string          `json:"root_entries"`
			DevEntries  []string          `json:"dev_entries"`
			EtcEntries  []string          `json:"etc_entries"`
			Pids        []int             `json:"pids"`
			Hostname    string            `json:"hostname"`
			UIDMap      []string          `json:"uid_map"`
			GIDMap      []string          `json:"gid_map"`
			UID         int               `json:"uid"`
			Groups      []int             `json:"groups"`
			Caps        map[string]string `json:"caps"`
			NoNewPrivs  string            `json:"no_new_privs"`
			Cwd         string            `json:"cwd"`
			Interfaces  []string          `json:"interfaces"`
			TTY         bool              `json:"tty"`
			SidIsSelf   bool              `json:"sid_is_self"`
		}
		hostPaths := []string{repoDir, dataDir, "/root", "/home", "/var", "/opt", "/srv", "/mnt", "/run", "/sys", "/boot"}
		r.okResult(t, &got, append([]string{data("isolation.py")}, hostPaths...)...)
		for p, seen := range got.Visible {
			if seen {
				t.Errorf("host path %s is visible inside", p)
			}
		}
		wantRoot := map[string]bool{"bin": true, "dev": true, "etc": true, "lib": true, "lib32": true, "lib64": true, "libx32": true, "proc": true, "sbin": true, "tmp": true, "usr": true, "workspace": true}
		for _, e := range got.RootEntries {
			if !wantRoot[e] {
				t.Errorf("unexpected entry /%s in the sandbox root %v", e, got.RootEntries)
			}
		}
		if want := []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"}; !reflect.DeepEqual(got.DevEntries, want) {
			t.Errorf("/dev holds %v, want %v", got.DevEntries, want)
		}
		for _, e := range got.EtcEntries {
			if e == "shadow" || e == "gshadow" || e == "sudoers" || e == "ssh" || e == "machine-id" {
				t.Errorf("host /etc/%s is visible", e)
			}
		}
		if len(got.Pids) != 2 || got.Pids[0] != 1 {
			t.Errorf("/proc lists pids %v, want only the init (1) and the payload", got.Pids)
		}
		if got.Hostname != "sbx" {
			t.Errorf("hostname %q, want sbx", got.Hostname)
		}
		if len(got.UIDMap) != 3 || got.UIDMap[1] == "0" || got.UIDMap[2] != "1" || len(got.GIDMap) != 3 || got.GIDMap[1] == "0" {
			t.Errorf("uid_map %v gid_map %v: want one id, never host 0", got.UIDMap, got.GIDMap)
		}
		if r.uid != 0 && got.UIDMap[1] != fmt.Sprint(r.uid) {
			t.Errorf("uid_map %v: an unprivileged caller must map onto itself (%d)", got.UIDMap, r.uid)
		}
		if got.UID != 1000 || got.Cwd != "/workspace" {
			t.Errorf("uid %d cwd %s, want 1000 and /workspace", got.UID, got.Cwd)
		}
		for k, v := range got.Caps {
			if strings.Trim(v, "0") != "" {
				t.Errorf("%s = %s, want all zero", k, v)
			}
		}
		if len(got.Caps) != 5 || got.NoNewPrivs != "1" {
			t.Errorf("caps %v NoNewPrivs %s", got.Caps, got.NoNewPrivs)
		}
		if !reflect.DeepEqual(got.Interfaces, []string{"lo"}) {
			t.Errorf("interfaces %v, want only lo", got.Interfaces)
		}
		if got.TTY || !got.SidIsSelf {
			t.Errorf("tty %v, own session %v: want no tty and a new session", got.TTY, got.SidIsSelf)
		}
	})
}

func TestNoNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	forEach(t, func(t *testing.T, r runner) {
		var got struct {
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		}
		r.okResult(t, &got, data("connect.py"), port)
		if got.Connected {
			t.Fatalf("the sandbox reached the host's 127.0.0.1:%s", port)
		}
	})
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	default:
	}
}

func TestCleanEnvironment(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var env map[string]string
		r.okResult(t, &env, "--env", "EXTRA=1", "--env", "TMPDIR=/tmp/x", data("env.py"))
		if _, ok := env["SBX_TEST_LEAK_MARKER"]; ok {
			t.Errorf("a host variable leaked in: %v", env)
		}
		var keys []string
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"EXTRA", "HOME", "LANG", "MPLBACKEND", "MPLCONFIGDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "TMPDIR", "XDG_CACHE_HOME"}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("environment keys %v, want %v", keys, want)
		}
		if env["EXTRA"] != "1" || env["LANG"] != "C.UTF-8" || env["HOME"] != "/workspace" || env["TMPDIR"] != "/tmp/x" {
			t.Errorf("environment %v", env)
		}
	})
}

func TestOnlyStdioFDs(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var fds []int
		r.okResult(t, &fds, data("fds.py"))
		if !reflect.DeepEqual(fds, []int{0, 1, 2}) {
			t.Fatalf("open fds %v, want [0 1 2]", fds)
		}
	})
}

func TestPayloadSignalDispositions(t *testing.T) {
	// The init ignores signals itself; none of that may reach the payload.
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--", "/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status")
		if out.code != 0 || strings.Count(out.stdout, "0000000000000000") != 2 {
			t.Fatalf("payload signal state:\n%s%s", out.stdout, out.stderr)
		}
	})
}

func TestInitSurvivesPayloadSignals(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		// The init guard refuses kill(1) (EPERM); what gets past it (none
		// of these, by pid 1) would meet dispositions that ignore it.
		res, _ := r.result(t, "-c", "import os\nfor s in (1,2,3,4,5,6,7,8,10,11,12,13,14,15,16,19,20,21,22,24,25,26,29,30,31):\n  try: os.kill(1, s)\n  except PermissionError: pass\nprint('alive')")
		if res.Status != nsjail.StatusOK || res.Stdout != "alive\n" {
			t.Fatalf("after signalling pid 1: status %s (%s) stdout %q stderr %q", res.Status, res.Message, res.Stdout, res.Stderr)
		}
	})
}

func TestFreshWorkspace(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		before := hostState(t)
		var got map[string]bool
		r.okResult(t, &got, data("persist.py"), "write")
		for p, ok := range got {
			if !ok {
				t.Fatalf("could not write %s", p)
			}
		}
		r.okResult(t, &got, data("persist.py"), "check")
		for p, ok := range got {
			if ok {
				t.Errorf("%s survived into the next run", p)
			}
		}
		if after := hostState(t); after != before {
			t.Errorf("host state changed by runs:\nbefore: %s\nafter:  %s", before, after)
		}
	})
}

// hostState summarises what a run could leave on the host: temp dirs
// named after sbx and the mount table.
func hostState(t *testing.T) string {
	t.Helper()
	var names []string
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		if strings.Contains(e.Name(), "sbx") && !strings.HasPrefix(e.Name(), "sbx-it-") {
			names = append(names, e.Name())
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("tmp=%v mounts=%d", names, strings.Count(string(mi), "\n"))
}

func TestDaemonDiesWithRun(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		m := marker(t)
		defer killMarked(m)
		res := r.okResult(t, nil, data("daemon.py"), m)
		if res.Stdout != "daemon started\n" {
			t.Fatalf("stdout %q", res.Stdout)
		}
		if pids := processesWith(m); len(pids) != 0 {
			t.Fatalf("daemon still alive after sbx returned: pids %v", pids)
		}
	})
}

func TestSandboxDiesWithSbx(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		m := marker(t)
		defer killMarked(m)
		cmd := r.command("exec", data("sleeper.py"), m)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := readLine(bufio.NewReader(stdout))
		if err != nil || line != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("payload did not start: %q %v", line, err)
		}
		if len(processesWith(m)) == 0 {
			t.Fatal("cannot see the payload from the host; the test would prove nothing")
		}
		// SIGKILL sbx (through setpriv, which execs it: same pid).
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(time.Second)
		for len(processesWith(m)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox processes %v alive 1s after sbx was killed", processesWith(m))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestBadInput(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		cases := [][]string{
			{"exec", data("no-such-script.py")},
			{"exec", "--no-such-flag", data("hello.py")},
			{"exec", "--file", "/no/such/input", data("hello.py")},
			{"exec", "--rootfs", "/no/such/dir", data("hello.py")},
			{"exec", "--profile", "no-such-profile", data("hello.py")},
			{"exec", "--timeout", "soon", data("hello.py")},
			{"exec"},
			{"no-such-command"},
		}
		for _, args := range cases {
			out := r.exec(t, "", args...)
			lines := strings.Split(strings.TrimRight(out.stderr, "\n"), "\n")
			if out.code != nsjail.ExitSbxFailed || len(lines) != 1 || !strings.HasPrefix(lines[0], "sbx: ") || strings.Contains(out.stderr, "goroutine") {
				t.Errorf("sbx %v: exit %d, stderr %q; want 125 and one line", args, out.code, out.stderr)
			}
		}
	})
}

func TestSignalsForwarded(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
			cmd := r.command("exec", data("trap.py"))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(stdout)
			if line, err := readLine(br); err != nil || line != "ready" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("payload did not start: %q %v", line, err)
			}
			cmd.Process.Signal(sig)
			line, _ := readLine(br)
			err = cmd.Wait()
			if line != "got "+unix.SignalName(sig) || err != nil {
				t.Errorf("%v to sbx: payload said %q, sbx ended with %v; want the signal forwarded and exit 0", sig, line, err)
			}
		}
	})
}
