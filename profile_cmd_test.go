package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// runSbx runs the CLI in-process with stdout and stderr captured.
func runSbx(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runSbxWith(t, deps{}, args...)
}

// runSbxWith is runSbx with main's deps.
func runSbxWith(t *testing.T, d deps, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	code = runWith(append([]string{"sbx"}, args...), d)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

func writeProfileFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileList(t *testing.T) {
	code, out, errOut := runSbx(t, "profile", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || errOut != "" || len(lines) != 3 || !strings.HasPrefix(lines[2], "strict     untrusted model-written code") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// `sbx profile show strict` prints every effective value with its source.
func TestProfileShowStrict(t *testing.T) {
	code, out, errOut := runSbx(t, "profile", "show", "strict")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"# effective profile strict\n",
		"\nlimits.memory           = \"256M\"       # strict:13\n",
		"\nseccomp.policy          = \"allowlist\"  # strict:34\n",
		"\nfilesystem.workspace    = \"/workspace\" # default\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// One line per key, 35 keys, two header lines.
	if n := strings.Count(out, "\n"); n != 37 {
		t.Errorf("%d lines:\n%s", n, out)
	}
}

func TestProfileShowFileAndFlags(t *testing.T) {
	ref := writeProfileFile(t, "custom.toml", "extends = \"strict\"\n[limits]\npids = 32\n[env]\nMODE = \"test\"\n")
	code, out, errOut := runSbx(t, "profile", "show", "--memory", "512M", ref, "--json")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got showJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	check := func(key string, value any, source string) {
		s := got.Values[key]
		if s.Value != value || s.Origin.String() != source {
			t.Errorf("%s = %#v from %v, want %#v from %s", key, s.Value, s.Origin, value, source)
		}
	}
	check("limits.memory", "512M", "flag --memory")
	check("limits.pids", float64(32), ref+":3")
	check("limits.wall_time", "10s", "strict:17")
	check("env.MODE", "test", ref+":5")
	if got.Profile != "custom" || strings.Join(got.Chain, ",") != ref+",strict" || got.Seccomp.Policy != "allowlist" || got.Seccomp.Rules != nil || len(got.Warnings) != 0 {
		t.Errorf("show --json = %+v", got)
	}
}

// The seccomp integration fills the seccompRules hook; show prints its
// lines under seccomp.policy, as comments.
func TestProfileShowSeccompHook(t *testing.T) {
	rules := func(policy string) ([]string, error) {
		return []string{policy + ": ptrace EPERM (host escape surface)"}, nil
	}
	_, out, _ := runSbxWith(t, deps{seccompRules: rules}, "profile", "show", "standard")
	if !strings.Contains(out, "# standard:33\n#   denylist: ptrace EPERM (host escape surface)\n") {
		t.Errorf("no rules under seccomp.policy:\n%s", out)
	}
}

func TestProfileValidate(t *testing.T) {
	good := writeProfileFile(t, "good.toml", "extends = \"strict\"\n[limits]\nmemory = \"512M\"\n")
	code, out, errOut := runSbx(t, "profile", "validate", good)
	if code != 0 || out != "ok\n" || errOut != "" {
		t.Errorf("good: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	bad := writeProfileFile(t, "bad.toml", "[limits]\nwall_tme = \"3s\"\nmemory = \"12Q\"\npids = 0\n")
	code, out, errOut = runSbx(t, "profile", "validate", bad)
	want := "sbx: profile " + bad + ": line 2: unknown key limits.wall_tme (did you mean limits.wall_time?)\n" +
		"sbx: profile " + bad + `: line 3: limits.memory = "12Q": not a size (want a byte count, or a number with a unit K, M, G or T, powers of 1024: "256M", "1.5G")` + "\n" +
		"sbx: profile " + bad + ": line 4: limits.pids = 0: must be within 1..4194304\n"
	if code != nsjail.ExitSbxFailed || out != "" || errOut != want {
		t.Errorf("bad: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", code, out, errOut, want)
	}

	weak := writeProfileFile(t, "weak.toml", "[seccomp]\npolicy = \"none\"\n")
	code, out, errOut = runSbx(t, "profile", "validate", weak, good)
	wantErr := "sbx: WARNING: seccomp.policy = \"none\" (" + weak + ":2): no syscall filter: the whole kernel interface is open to the payload, the usual way out of a sandbox\n"
	if code != 0 || out != weak+": ok\n"+good+": ok\n" || errOut != wantErr {
		t.Errorf("weak: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, _, errOut = runSbx(t, "profile", "validate")
	if code != nsjail.ExitSbxFailed || errOut != "sbx: want one or more profile files (see 'sbx profile validate --help')\n" {
		t.Errorf("no file: exit %d, stderr %q", code, errOut)
	}
}

// A bad flag value is one line naming the flag; no sandbox is started.
func TestExecFlagErrors(t *testing.T) {
	cases := map[string][]string{
		`sbx: --memory "12Q": not a size (want a byte count, or a number with a unit K, M, G or T, powers of 1024: "256M", "1.5G")` + "\n": {"--memory", "12Q"},
		`sbx: --timeout "soon": not a duration (want "500ms", "1.5s", "2m", or a number of seconds)` + "\n":                                {"--timeout", "soon"},
		`sbx: --cpus "0": must be more than 0 and at most 1024` + "\n":                                                                     {"--cpus", "0"},
		`sbx: --pids "0": must be within 1..4194304 (and 1 more)` + "\n":                                                                   {"--pids", "0", "--nofile", "0"},
	}
	for want, flags := range cases {
		args := append(append([]string{"exec"}, flags...), "-c", "print(1)")
		code, out, errOut := runSbx(t, args...)
		if code != nsjail.ExitSbxFailed || out != "" || errOut != want {
			t.Errorf("sbx %v: exit %d, stdout %q, stderr %q; want %q", args, code, out, errOut, want)
		}
	}
}
