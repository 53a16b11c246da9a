//go:build integration

// Package tests holds the integration tests: they build the real sbx
// binary and run real payloads from testdata/ through it, as root and as
// uid 65534, asserting on the Result and on what is left on the host.
package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

var (
	// sbxBin is the binary under test, built by TestMain.
	sbxBin string
	// dataDir is a world-readable copy of testdata/, so that uid 65534
	// can read the payloads wherever the checkout lives.
	dataDir string
	// exampleDir is the same for examples/.
	exampleDir string
	// repoDir is the checkout (it must be invisible inside).
	repoDir string
)

// nobody is the unprivileged uid the rootless runs use.
const nobody = 65534

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

// mountsAtStart is the host's mount table before any test ran.
var mountsAtStart = map[string]bool{}

func testMain(m *testing.M) int {
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			mountsAtStart[line] = true
		}
	}
	var err error
	repoDir, err = filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "sbx-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)
	sbxBin = filepath.Join(tmp, "sbx")
	if prebuilt := os.Getenv("SBX_BIN"); prebuilt != "" {
		sbxBin = prebuilt
	} else {
		build := exec.Command("make", "-C", repoDir, "--no-print-directory", "sbx", "OUT="+sbxBin)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building sbx:", err)
			return 2
		}
	}
	dataDir = filepath.Join(tmp, "testdata")
	exampleDir = filepath.Join(tmp, "examples")
	for src, dst := range map[string]string{"testdata": dataDir, "examples": exampleDir} {
		if err := copyTree(filepath.Join(repoDir, src), dst); err != nil {
			fmt.Fprintf(os.Stderr, "copying %s: %v\n", src, err)
			return 2
		}
	}
	return m.Run()
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

func data(name string) string { return filepath.Join(dataDir, name) }

// runner is one identity sbx runs as.
type runner struct {
	name string
	uid  int
}

// runners are root and uid 65534 when the tests run as root (as on CI),
// otherwise just the caller.
func runners() []runner {
	if os.Geteuid() == 0 {
		return []runner{{"root", 0}, {"uid65534", nobody}}
	}
	return []runner{{fmt.Sprintf("uid%d", os.Geteuid()), os.Geteuid()}}
}

// forEach runs fn once per runner, as a subtest.
func forEach(t *testing.T, fn func(t *testing.T, r runner)) {
	for _, r := range runners() {
		t.Run(r.name, func(t *testing.T) {
			requireUserNS(t, r)
			fn(t, r)
		})
	}
}

// forEachParallel is forEach with the runners at the same time, for a
// test whose minutes go in waiting (wall limits, sleeps, drains), not in
// CPU, and whose runners share nothing: each its own server, directories
// and markers, and no check of host-wide state another runner changes
// (its connections, processes or mounts). They are parallel subtests, so
// the test still ends before the next one starts and
// TestZZNothingLeftBehind stays last. fn must not call t.Setenv (testing
// refuses it in a parallel test).
func forEachParallel(t *testing.T, fn func(t *testing.T, r runner)) {
	for _, r := range runners() {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			requireUserNS(t, r)
			fn(t, r)
		})
	}
}

func (r runner) command(args ...string) *exec.Cmd {
	// SBX_TEST_WRAP runs sbx through a wrapper, e.g. tests/vm/own-cgroup.sh
	// to give each sbx a delegated cgroup of its own (make vmtest).
	if w := os.Getenv("SBX_TEST_WRAP"); w != "" && r.uid == os.Geteuid() {
		return exec.Command(w, append([]string{sbxBin}, args...)...)
	}
	if r.uid != os.Geteuid() {
		args = append([]string{fmt.Sprintf("--reuid=%d", r.uid), fmt.Sprintf("--regid=%d", r.uid), "--clear-groups", sbxBin}, args...)
		return exec.Command("setpriv", args...)
	}
	return exec.Command(sbxBin, args...)
}

// output is what one sbx run printed and how it exited.
type output struct {
	stdout, stderr string
	code           int
}

func (r runner) exec(t *testing.T, stdin string, args ...string) output {
	t.Helper()
	cmd := r.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Env = append(os.Environ(), "SBX_TEST_LEAK_MARKER=leaked")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sbx %v: %v", args, err)
	}
	return output{so.String(), se.String(), code}
}

// result runs `sbx exec --json ARGS` and decodes the Result.
func (r runner) result(t *testing.T, args ...string) (*nsjail.Result, output) {
	t.Helper()
	out := r.exec(t, "", append([]string{"exec", "--json"}, args...)...)
	var res nsjail.Result
	dec := json.NewDecoder(strings.NewReader(out.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("sbx exec --json %v: bad Result (%v)\nstdout: %s\nstderr: %s", args, err, out.stdout, out.stderr)
	}
	if dec.More() {
		t.Fatalf("sbx exec --json %v: more than one JSON value on stdout:\n%s", args, out.stdout)
	}
	return &res, out
}

// okResult is result for a payload that must exit 0; its stdout, a JSON
// value, is decoded into v.
func (r runner) okResult(t *testing.T, v any, args ...string) *nsjail.Result {
	t.Helper()
	res, out := r.result(t, args...)
	if res.Status != nsjail.StatusOK {
		t.Fatalf("sbx exec %v: status %s (%s), want ok\nstdout: %s\nstderr: %s\nsbx stderr: %s", args, res.Status, res.Message, res.Stdout, res.Stderr, out.stderr)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(res.Stdout), v); err != nil {
			t.Fatalf("payload output is not JSON: %v\n%s", err, res.Stdout)
		}
	}
	return res
}

// requireUserNS skips when the kernel refuses user namespaces to this
// runner. SBX_MUST_WORK=1 (set by .ci/run) turns the skip into a failure.
func requireUserNS(t *testing.T, r runner) {
	t.Helper()
	cmd := r.command("exec", "--", "/bin/true")
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("sbx cannot build a sandbox as %s here: %v: %s", r.name, err, strings.TrimSpace(se.String()))
		if os.Getenv("SBX_MUST_WORK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (see kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns)")
	}
}

// hostHasInt80 says whether this kernel takes 32-bit system calls through
// int 0x80, by running testdata/int80.py on the host, outside any
// sandbox. A kernel without IA32 emulation (CONFIG_IA32_EMULATION off, or
// ia32_emulation=0, Linux 6.7+) has no gate for the vector: the
// instruction faults with SIGSEGV before any syscall entry, so before the
// seccomp filter, which then has nothing of that ABI to kill.
var hostHasInt80 = sync.OnceValues(func() (bool, error) {
	out, err := exec.Command("python3", data("int80.py")).Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGSEGV && string(out) == "calling\n":
		return false, nil
	}
	return false, fmt.Errorf("int80.py on the host: %v, stdout %q", err, out)
})

// int80Outcome says what int 0x80 must do to a payload under sbx's
// filter: the filter's kill where the kernel has the gate (true), or else
// the same SIGSEGV as outside the sandbox (false, and logged, so that a
// run says which it checked).
func int80Outcome(t *testing.T) (gate bool) {
	t.Helper()
	has, err := hostHasInt80()
	if err != nil {
		t.Fatal(err)
	}
	if !has {
		t.Log("this kernel has no IA32 emulation (int 0x80 faults with SIGSEGV on the host too): checking that it faults in the sandbox, not the filter's kill; x32 checks the kill")
	}
	return has
}

// processesWith lists host pids whose argv contains marker.
func processesWith(marker string) []int {
	var pids []int
	for pid := range cmdlinesWith(marker) {
		pids = append(pids, pid)
	}
	return pids
}

// cmdlinesWith lists the processes whose command line holds marker, with
// that command line (the NUL-separated argv) as read once.
func cmdlinesWith(marker string) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out[pid] = string(b)
		}
	}
	return out
}

// killMarked ends, by pid, leftovers of a failed test: only processes
// that carry this test's own marker.
func killMarked(marker string) {
	for _, pid := range processesWith(marker) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}

func marker(t *testing.T) string {
	return fmt.Sprintf("sbx-test-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// readLine reads up to the first newline.
func readLine(r io.Reader) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return string(b), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			return string(b), err
		}
	}
}
