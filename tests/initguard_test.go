//go:build integration

package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// TestPayloadCannotReachInit: a payload of the init's own uid tries to
// change the init's limits (on pid 1 and on each of the init's threads by
// tid), signal it, move its scheduling, and write its /proc files. Each
// attempt fails, under every policy (under "none", the init guard alone),
// and the file it wrote first is in the report.
func TestPayloadCannotReachInit(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, profile := range []string{"standard", "strict", data("profiles/no-seccomp.toml")} {
			res, out := r.result(t, "--profile", profile, data("reach_init.py"), "process")
			if res.Status != nsjail.StatusOK {
				t.Fatalf("%s: status %s (%s), want ok\nstdout %s\nstderr %s\nsbx: %s", profile, res.Status, res.Message, res.Stdout, res.Stderr, out.stderr)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil || len(got) < 10 {
				t.Fatalf("%s: payload output %q: %v", profile, res.Stdout, err)
			}
			for attempt, errno := range got {
				if errno == "ok" {
					t.Errorf("%s: %s succeeded", profile, attempt)
				}
			}
			if len(res.Files) != 1 || res.Files[0].Path != "before.txt" || res.FilesTruncated {
				t.Errorf("%s: files %+v (truncated %v), want before.txt", profile, res.Files, res.FilesTruncated)
			}
		}
	})
}

// startHeld starts `sbx exec args...` as r for a payload that reports on
// its stdout and then waits to be ended, while the test checks the
// host's side. At the test's end SIGTERM reaches the payload (sbx
// forwards it) and sbx cleans up; SIGKILL only if sbx has not exited
// within 30s. It returns the command, the payload's stdout and sbx's
// stderr.
func startHeld(t *testing.T, r runner, args ...string) (*exec.Cmd, *bufio.Reader, *lockedBuffer) {
	t.Helper()
	cmd := r.command(append([]string{"exec"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	se := &lockedBuffer{}
	cmd.Stderr = se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return cmd, bufio.NewReader(stdout), se
}

// TestHostQuotasSurviveSandbox: while a payload holds all it can of the
// per-user kernel quotas that the kernel also charges to the user who
// started sbx (inotify instances; queued real-time signals), a host
// process of that user can still take some. Before the sandbox bounded
// them, 128 inotify instances or 96,365 queued signals in one sandbox
// left the caller none (EMFILE, EAGAIN) for the run's lifetime.
func TestHostQuotasSurviveSandbox(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		_, stdout, se := startHeld(t, r, data("drain_quotas.py"))
		line, err := readLine(stdout)
		var inotify, signals int
		if _, serr := fmt.Sscanf(line, "ready %d %d", &inotify, &signals); err != nil || serr != nil {
			t.Fatalf("payload: %q %v %v; sbx stderr %s", line, err, serr, se.String())
		}
		if inotify > 16 || signals > 1024 {
			t.Errorf("the payload holds %d inotify instances and %d queued signals; want at most 16 and 1024 (standard)", inotify, signals)
		}
		// The host side: the same user as sbx, outside any sandbox.
		check := exec.Command("/usr/bin/python3", data("quota_check.py"))
		if r.uid != os.Geteuid() {
			check = exec.Command("setpriv", fmt.Sprintf("--reuid=%d", r.uid), fmt.Sprintf("--regid=%d", r.uid), "--clear-groups", "/usr/bin/python3", data("quota_check.py"))
		}
		out, err := check.Output()
		if err != nil {
			t.Fatalf("host check: %v", err)
		}
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("host check printed %q: %v", out, err)
		}
		for k, v := range got {
			if v != "ok" {
				t.Errorf("host uid %d: %s: %s while the sandbox runs", r.uid, k, v)
			}
		}
	})
}

// TestQuotasInResult: the bounds are in the Result's limits, with what
// enforces them, and the sandbox sees them.
func TestQuotasInResult(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var seen map[string]string
		res := r.okResult(t, &seen, "--profile", "strict", "-c", `import json, os, resource
d = {f: open("/proc/sys/user/" + f).read().strip() for f in os.listdir("/proc/sys/user")}
for n in ("SIGPENDING", "MSGQUEUE", "CORE"):
    d[n] = "%d/%d" % resource.getrlimit(getattr(resource, "RLIMIT_" + n))
# A soft RLIMIT_CORE of 0 would hand crashes to a piped core_pattern
# helper again; Python reports setrlimit's EPERM as ValueError.
try:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 1))
    d["lower core"] = "ok"
except (ValueError, OSError) as e:
    d["lower core"] = type(e).__name__
print(json.dumps(d))`)
		want := map[string]string{
			"max_inotify_instances": "16", "max_inotify_watches": "8192", "max_mnt_namespaces": "0", "max_user_namespaces": "0",
			"SIGPENDING": "256/256", "MSGQUEUE": "0/0", "CORE": "1/1", "lower core": "ValueError",
		}
		for k, v := range want {
			if seen[k] != v {
				t.Errorf("inside: %s = %q, want %q (all: %v)", k, seen[k], v, seen)
			}
		}
		for k, by := range map[string]string{"sigpending": nsjail.ByRlimit, "msgqueue": nsjail.ByRlimit, "inotify_instances": nsjail.ByUserNS, "inotify_watches": nsjail.ByUserNS} {
			if l, ok := res.Limits[k]; !ok || l.EnforcedBy != by {
				t.Errorf("limits.%s = %+v, want enforced by %s", k, l, by)
			}
		}
		if res.Limits["sigpending"].Value != 256 || res.Limits["inotify_instances"].Value != 16 {
			t.Errorf("limits %+v", res.Limits)
		}
	})
}

// TestInitNotBoundByPayloadLimits: the payload's rlimits are the
// payload's; the init (which walks the workspace after the payload) keeps
// its own, but RLIMIT_CORE. Before, the init set them on itself to pass
// them on, so strict's RLIMIT_CPU backstop could kill its report.
func TestInitNotBoundByPayloadLimits(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		var got map[string][]string
		r.okResult(t, &got, "--profile", "strict", "-c", `import json, resource
lim = {}
for line in open("/proc/1/limits").read().splitlines()[1:]:
    name, rest = line[:26].strip(), line[26:].split()
    lim[name] = rest[:2]
me = {}
for n, key in (("CPU", "Max cpu time"), ("NOFILE", "Max open files"), ("FSIZE", "Max file size"), ("CORE", "Max core file size")):
    me[n] = ["%d" % v for v in resource.getrlimit(getattr(resource, "RLIMIT_" + n))]
    me["init " + n] = lim[key]
print(json.dumps(me))`)
		// RLIMIT_CPU: strict's 5s, a second later as a backstop to a
		// cgroup (6/7), or on its own without one (5/6).
		cpu := []string{"6", "7"}
		if strings.Join(got["CPU"], "/") == "5/6" {
			cpu = []string{"5", "6"}
		}
		for n, want := range map[string][]string{"CPU": cpu, "NOFILE": {"256", "256"}, "FSIZE": {"67108864", "67108864"}, "CORE": {"1", "1"}} {
			if strings.Join(got[n], "/") != strings.Join(want, "/") {
				t.Errorf("payload RLIMIT_%s = %v, want %v", n, got[n], want)
			}
			init := got["init "+n]
			if n == "CORE" {
				if strings.Join(init, "/") != "1/1" {
					t.Errorf("init RLIMIT_CORE = %v, want 1/1", init)
				}
				continue
			}
			if strings.Join(init, "/") == strings.Join(want, "/") {
				t.Errorf("init RLIMIT_%s = %v: the payload's", n, init)
			}
		}
	})
}
