//go:build integration

package tests

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The inverse layout (issue 13, internal/fullbin): `make sbx` installs a
// lean sbx without serve (and prometheus's client_golang with it) and
// without image support (go-containerregistry and what it links), which
// embeds the full sbx and execs it from a sealed memfd for `sbx serve`,
// `sbx image` and a run on an image.

// fullMemfdExe is what /proc/PID/exe of the full sbx the lean one handed
// off to reads (fullbin.MemfdName).
const fullMemfdExe = "/memfd:sbx (deleted)"

// serveOnlyModules are modules only `sbx serve` links: the lean sbx must
// not, the full one must.
var serveOnlyModules = []string{"github.com/prometheus/client_golang", "github.com/prometheus/client_model", "google.golang.org/protobuf"}

// imageOnlyModules are modules only image support links (package image,
// engine/image_store.go): the lean sbx must not, the full one must.
var imageOnlyModules = []string{"github.com/google/go-containerregistry", "github.com/opencontainers/go-digest",
	"github.com/opencontainers/image-spec", "github.com/klauspost/compress", "github.com/docker/cli"}

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
// build info lists no client_golang or protobuf, nor go-containerregistry,
// go-digest, image-spec, klauspost/compress or docker's config, which the
// full sbx it runs for `sbx serve` and images does), and the two say the
// same for --help, help, --version, version and the help of the commands
// handed off: the lean sbx lists the commands it hands off like its own.
func TestLeanBinaryLeavesServeOut(t *testing.T) {
	lean := modules(t, sbxBin)
	if !hasModule(lean, "github.com/urfave/cli/v2") {
		t.Fatalf("the build info of %s lists no urfave/cli: the check would see nothing (%v)", sbxBin, lean)
	}
	for _, m := range append(serveOnlyModules, imageOnlyModules...) {
		if hasModule(lean, m) {
			t.Errorf("the installed sbx links %s: it is not the lean sbx", m)
		}
	}
	forEach(t, func(t *testing.T, r runner) {
		s := startServe(t, r, "")
		pid := sbxProcess(t, s.cmd.Process.Pid)
		full := fullSbxOf(t, pid)
		fullMods := modules(t, full)
		for _, m := range append(serveOnlyModules, imageOnlyModules...) {
			if !hasModule(fullMods, m) {
				t.Errorf("the full sbx that sbx serve runs does not link %s", m)
			}
		}
		for _, args := range [][]string{{"--help"}, {"help"}, {"--version"}, {"version"}, {"serve", "--help"}, {"help", "serve"}, {"exec", "--help"},
			{"image", "--help"}, {"help", "image"}, {"image"}, {"image", "pull", "--help"}, {"image", "ls", "--help"}, {"doctor", "--help"}, {"repl", "--help"}} {
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

// TestLeanHandsImageRunsOff: the lean sbx links no image support, and
// hands a run that needs an image to the full sbx as soon as its
// effective profile says so, before anything has read stdin: `sbx exec
// --image`, a profile file's image key, a script on stdin (`sbx exec
// -`), `sbx repl` on an image profile. The exec runs in the same process,
// now /memfd:sbx, and its payload gets the stdin the caller gave; a run
// that needs no image, by flag or by profile file, stays in the lean sbx.
// A profile on an image read from a pipe, which the full sbx could not
// read again, is refused.
func TestLeanHandsImageRunsOff(t *testing.T) {
	reg := startRegistry(t)
	ref, digest := reg.push(t, "t/lean-python:v1", buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t)))
	forEach(t, func(t *testing.T, r runner) {
		// imageProfile pulls ref with `sbx image pull` (handed off) into
		// a store of the runner's, SBX_HOME for the rest of the test.
		home, onImage := imageProfile(t, r, ref)
		plain := filepath.Join(home, "plain.toml")
		if err := os.WriteFile(plain, []byte("extends = \"standard\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The payload says it runs, then echoes its stdin (where from:
		// the image has sbx_image_marker, the host does not).
		const echo = `import sys
try:
    import sbx_image_marker; where = sbx_image_marker.WHERE
except ImportError:
    where = "host"
print("ready", flush=True)
print(where, sys.stdin.read(), flush=True)`
		for _, tc := range []struct {
			name  string
			args  []string
			where string
		}{
			{"--image", []string{"--image", ref}, "image"},
			{"the profile's image key", []string{"--profile", onImage}, "image"},
			{"no image", nil, "host"},
			{"a profile file without one", []string{"--profile", plain}, "host"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cmd := r.command(append(append([]string{"exec"}, tc.args...), "-c", echo)...)
				stdin, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer cmd.Process.Kill()
				if line, err := readLine(stdout); line != "ready" {
					stdin.Close()
					cmd.Wait()
					t.Fatalf("sbx exec %v: first line %q (%v), want ready\n%s", tc.args, line, err, stderr.String())
				}
				// The payload runs: whatever sbx handed off is done.
				exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", sbxProcess(t, cmd.Process.Pid)))
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(stdin, "ping")
				stdin.Close()
				rest, _ := io.ReadAll(stdout)
				if err := cmd.Wait(); err != nil || string(rest) != tc.where+" ping\n" {
					t.Errorf("sbx exec %v: %v, then %q, want %q\n%s", tc.args, err, rest, tc.where+" ping\n", stderr.String())
				}
				switch {
				case tc.where == "image" && exe != fullMemfdExe:
					t.Errorf("sbx exec %v ran on the image from %s, want the full sbx (%s): the lean sbx ran an image", tc.args, exe, fullMemfdExe)
				case tc.where == "host" && exe == fullMemfdExe:
					t.Errorf("sbx exec %v, with no image, was handed off to the full sbx", tc.args)
				}
			})
		}
		// The script on stdin: read by the full sbx, never by the lean one.
		out := r.exec(t, "import sbx_image_marker; print(sbx_image_marker.WHERE)\n", "exec", "--json", "--image", ref, "-")
		var res struct {
			Status, Stdout, Message string
			Image                   struct{ Digest string }
		}
		if err := json.Unmarshal([]byte(out.stdout), &res); err != nil || res.Status != "ok" || res.Stdout != "image\n" || res.Image.Digest != digest {
			t.Errorf("sbx exec --image REF - (the script on stdin): %v %+v\n%s", err, res, out.stderr)
		}
		// A profile on an image given as a pipe (`--profile <(...)`):
		// the full sbx would read it again and find it empty, and run on
		// the defaults without the image. Refused, saying why.
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		// The runner's own pipe, as a shell of its would make: open(2) of
		// /dev/fd/3 checks the pipe's owner and mode.
		if err := pr.Chown(r.uid, r.uid); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(pw, "extends = \"strict\"\nimage = %q\n", ref)
		pw.Close()
		cmd := r.command("exec", "--json", "--profile", "/dev/fd/3", "--", "/bin/true")
		cmd.ExtraFiles = []*os.File{pr}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err = cmd.Run()
		pr.Close()
		var piped struct{ Status, Message string }
		if json.Unmarshal(so.Bytes(), &piped); err == nil || piped.Status != "setup_error" || !strings.Contains(piped.Message, "profile /dev/fd/3 is not a regular file (a pipe)") {
			t.Errorf("sbx exec --profile /dev/fd/3 (a pipe, on an image): %v, Result %+v, want a setup_error saying the pipe cannot be read again\n%s", err, piped, se.String())
		}
		// sbx repl on an image profile: the session is the full sbx's.
		out = r.exec(t, "import sbx_image_marker\nsbx_image_marker.WHERE\n", "repl", "--profile", onImage)
		if out.code != 0 || !strings.Contains(out.stdout, "'image'") {
			t.Errorf("sbx repl --profile (on an image): exit %d\n%s%s", out.code, out.stdout, out.stderr)
		}
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
		// Images are the full sbx's: sbx image, and a run on one, which
		// says so in its Result.
		if _, stderr, code := refused("image", "ls"); code != 125 || !strings.Contains(stderr, "sbx: sbx image is run by the full sbx, which this lean sbx embeds, and it could not be started: copying the full sbx (") {
			t.Errorf("sbx image ls without memfds: exit %d, want 125 naming the hand-off\n%s", code, stderr)
		}
		stdout, stderr, code := refused("exec", "--json", "--image", "127.0.0.1:1/t/never:v1", "--", "/bin/true")
		var res struct{ Status, Message string }
		if json.Unmarshal([]byte(stdout), &res); code != 125 || res.Status != "setup_error" ||
			!strings.Contains(res.Message, "sbx exec on an image is run by the full sbx, which this lean sbx embeds, and it could not be started: copying the full sbx (") {
			t.Errorf("sbx exec --image without memfds: exit %d, Result %+v, want 125 and a setup_error naming the hand-off\n%s", code, res, stderr)
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
		stdout, _, _ = refused("doctor", "--json")
		if c := check(stdout); c.Status != "warn" || !strings.Contains(c.Detail, "the lean sbx") || !strings.Contains(c.Detail, `fails here: copying the full sbx`) || !strings.Contains(c.Detail, "memfd_create(") {
			t.Errorf("doctor without memfds: sbx binary %+v, want a warning naming memfd_create", c)
		}
		if c := check(r.exec(t, "", "doctor", "--json").stdout); c.Status != "ok" || !strings.Contains(c.Detail, "the lean sbx") || !strings.Contains(c.Detail, "it starts here") {
			t.Errorf("doctor: sbx binary %+v, want ok: the lean sbx, whose hand-off works", c)
		}
	})
}
