//go:build integration

package tests

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The inverse layout (issue 13, internal/fullbin): `make sbx` installs a
// lean sbx without serve (and prometheus's client_golang with it), which
// embeds the full sbx and execs it from a sealed memfd for `sbx serve`.

// fullMemfdExe is what /proc/PID/exe of the full sbx the lean one handed
// off to reads (fullbin.MemfdName).
const fullMemfdExe = "/memfd:sbx (deleted)"

// serveOnlyModules are modules only `sbx serve` links: the lean sbx must
// not, the full one must.
var serveOnlyModules = []string{"github.com/prometheus/client_golang", "github.com/prometheus/client_model", "google.golang.org/protobuf"}

// modules lists the modules the Go binary at path was built with.
func modules(t *testing.T, path string) []string {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("build info of %s: %v", path, err)
	}
	var mods []string
	for _, d := range bi.Deps {
		mods = append(mods, d.Path)
	}
	return mods
}

func hasModule(mods []string, m string) bool {
	for _, x := range mods {
		if x == m {
			return true
		}
	}
	return false
}

// fullSbxOf copies the executable of the running process pid (the full
// sbx, from its memfd) into a file of its own, mode 0755.
func fullSbxOf(t *testing.T, pid int) string {
	t.Helper()
	img, err := os.ReadFile(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/exe: %v", pid, err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "sbx-full")
	if err := os.WriteFile(path, img, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOut is one run's stdout, stderr and exit status, "exit N" or "ok".
func runOut(bin string, args ...string) string {
	cmd := exec.Command(bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	status := "ok"
	if err != nil {
		status = err.Error()
	}
	return fmt.Sprintf("%s\n--- stderr\n%s--- %s", so.String(), se.String(), status)
}

// TestLeanBinaryLeavesServeOut: the installed sbx is the lean one (its
// build info lists no client_golang or protobuf, which the full sbx it
// runs for `sbx serve` does), and the two say the same for --help, help,
// --version and version: the lean sbx lists the commands it hands off
// like its own.
func TestLeanBinaryLeavesServeOut(t *testing.T) {
	lean := modules(t, sbxBin)
	if !hasModule(lean, "github.com/urfave/cli/v2") {
		t.Fatalf("the build info of %s lists no urfave/cli: the check would see nothing (%v)", sbxBin, lean)
	}
	for _, m := range serveOnlyModules {
		if hasModule(lean, m) {
			t.Errorf("the installed sbx links %s: it is not the lean sbx", m)
		}
	}
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		pid := sbxProcess(t, s.cmd.Process.Pid)
		full := fullSbxOf(t, pid)
		fullMods := modules(t, full)
		for _, m := range serveOnlyModules {
			if !hasModule(fullMods, m) {
				t.Errorf("the full sbx that sbx serve runs does not link %s", m)
			}
		}
		for _, args := range [][]string{{"--help"}, {"help"}, {"--version"}, {"version"}, {"serve", "--help"}, {"help", "serve"}, {"exec", "--help"}} {
			if l, f := runOut(sbxBin, args...), runOut(full, args...); l != f {
				t.Errorf("sbx %s: the lean sbx says\n%s\nthe full one\n%s", strings.Join(args, " "), l, f)
			}
		}
	})
}

// TestLeanServeRunsFromSealedMemfd: `sbx serve` of the lean sbx is the
// full sbx exec'd, in the same process, from a memfd sealed against
// writes, shrinking, growing and new seals (runc's CVE-2019-5736: no
// process, root included, may change what the server runs), with the
// argv it was given; its sandboxes' init is sbx-init from a sealed memfd
// of its own, copied from that memfd (initbin/selfcopy.go).
func TestLeanServeRunsFromSealedMemfd(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		pid := sbxProcess(t, s.cmd.Process.Pid)
		exe := fmt.Sprintf("/proc/%d/exe", pid)
		if l, err := os.Readlink(exe); err != nil || l != fullMemfdExe {
			t.Fatalf("sbx serve (pid %d) runs %q (%v), want %q", pid, l, err, fullMemfdExe)
		}
		fd, err := unix.Open(exe, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s O_RDONLY: %v", exe, err)
		}
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		unix.Close(fd)
		const want = unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
		if err != nil || seals&want != want {
			t.Errorf("F_GET_SEALS of %s = %#x %v, want %#x set", exe, seals, err, want)
		}
		if err := tryWrite(exe); err != nil {
			t.Error(err)
		}
		if r.uid != os.Geteuid() {
			w := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", r.uid), fmt.Sprintf("--regid=%d", r.uid), "--clear-groups",
				"/usr/bin/python3", "-c", writeAttempt, exe)
			if b, err := w.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "refused" {
				t.Errorf("as uid %d, writing %s: %s %v", r.uid, exe, b, err)
			}
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if got := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(got) < 4 || got[0] != sbxBin || strings.Join(got[1:4], " ") != "serve --listen 127.0.0.1:0" {
			t.Errorf("sbx serve's argv is %q, want the one it was started with", got)
		}

		res, _ := s.exec(map[string]any{"code": "print(1)"})
		if d := res.Layers["namespaces"].Detail; res.Status != "ok" || !strings.Contains(d, "pid 1 is sbx-init") || !strings.Contains(d, "sealed memfd") {
			t.Fatalf("a run of the handed-off server: status %s, namespaces layer %q", res.Status, d)
		}
		if memfdOf(t, pid) == "" {
			t.Errorf("sbx serve (pid %d) holds no fd of /memfd:sbx-init", pid)
		}
		t.Logf("sbx serve after one run: %s", rssLine(pid))
	})
}

// rssLine is pid's VmRSS, RssAnon and RssShmem (the memfd's pages it
// has mapped), for the log.
func rssLine(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:", "RssShmem:"} {
			if strings.HasPrefix(l, k) {
				out = append(out, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return strings.Join(out, ", ")
}

// TestLeanHandOffFailureIsReported: where the memfd cannot be made (a
// seccomp filter of the caller that fails memfd_create with EPERM,
// testdata/no_memfd.py, as a host's policy or vm.memfd_noexec=2 would),
// `sbx serve` exits 125 with a message that names the step, its
// arguments, the errno and what it means; `sbx exec` still runs (its
// init falls back to sbx itself), and `sbx doctor` warns on the
// hand-off, which it reports working without the filter.
func TestLeanHandOffFailureIsReported(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		prefix := []string{"/usr/bin/python3", data("no_memfd.py"), sbxBin}
		if r.uid != os.Geteuid() {
			prefix = append([]string{"setpriv", fmt.Sprintf("--reuid=%d", r.uid), fmt.Sprintf("--regid=%d", r.uid), "--clear-groups"}, prefix...)
		}
		refused := func(args ...string) (string, string, int) {
			argv := append(append([]string{}, prefix...), args...)
			// A server that does start (a full sbx) is killed, by pid,
			// after a minute: the test then fails on its exit status.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%v: %v", argv, err)
			}
			return so.String(), se.String(), code
		}
		_, stderr, code := refused("serve", "--listen", "127.0.0.1:0")
		if code != 125 {
			t.Errorf("sbx serve without memfds: exit %d, want 125\n%s", code, stderr)
		}
		for _, w := range []string{
			"sbx: sbx serve is run by the full sbx, which this lean sbx embeds, and it could not be started: copying the full sbx (",
			`memfd_create("sbx", MFD_CLOEXEC|MFD_ALLOW_SEALING|MFD_EXEC): operation not permitted`,
			"a seccomp filter or an LSM policy of this process refuses memfd_create(2)",
		} {
			if !strings.Contains(stderr, w) {
				t.Errorf("sbx serve without memfds: stderr does not say %q:\n%s", w, stderr)
			}
		}
		if stdout, stderr, code := refused("exec", "--", "/bin/echo", "still runs"); code != 0 || stdout != "still runs\n" {
			t.Errorf("sbx exec without memfds: exit %d, stdout %q\n%s", code, stdout, stderr)
		}

		check := func(out string) (c struct{ Status, Detail string }) {
			var rep struct {
				Checks []struct{ Name, Status, Detail string }
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("sbx doctor --json: %v\n%s", err, out)
			}
			for _, x := range rep.Checks {
				if x.Name == "sbx binary" {
					c.Status, c.Detail = x.Status, x.Detail
					return c
				}
			}
			t.Fatalf("sbx doctor --json has no \"sbx binary\" check:\n%s", out)
			return c
		}
		stdout, _, _ := refused("doctor", "--json")
		if c := check(stdout); c.Status != "warn" || !strings.Contains(c.Detail, "the lean sbx") || !strings.Contains(c.Detail, `fails here: copying the full sbx`) || !strings.Contains(c.Detail, "memfd_create(") {
			t.Errorf("doctor without memfds: sbx binary %+v, want a warning naming memfd_create", c)
		}
		if c := check(r.exec(t, "", "doctor", "--json").stdout); c.Status != "ok" || !strings.Contains(c.Detail, "the lean sbx") || !strings.Contains(c.Detail, "it starts here") {
			t.Errorf("doctor: sbx binary %+v, want ok: the lean sbx, whose hand-off works", c)
		}
	})
}
