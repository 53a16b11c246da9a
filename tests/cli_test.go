//go:build integration

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// rawResult decodes the one JSON object sbx printed on stdout as a map, so
// that a test sees null where a typed decode would see an empty value.
func rawResult(t *testing.T, out output) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out.stdout))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("no JSON Result on stdout (%v)\nstdout: %s\nstderr: %s", err, out.stdout, out.stderr)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value on stdout:\n%s", out.stdout)
	}
	return m
}

// checkShapes fails for each field of a Result whose JSON type is not the
// one the schema gives it: lists are always lists, objects always objects
// (issue 19, point 2).
func checkShapes(t *testing.T, m map[string]any) {
	t.Helper()
	for _, k := range []string{"files", "inputs", "network"} {
		if _, ok := m[k].([]any); !ok {
			t.Errorf("%s is %#v, want a list", k, m[k])
		}
	}
	for _, k := range []string{"limits", "layers", "usage"} {
		if _, ok := m[k].(map[string]any); !ok {
			t.Errorf("%s is %#v, want an object", k, m[k])
		}
	}
}

// TestSetupErrorListsAreLists: a setup_error Result has the same shape as
// a successful one, so that `for f in r["files"]` works on every Result.
func TestSetupErrorListsAreLists(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for name, args := range map[string][]string{
			"missing script": {"exec", "--json", data("no-such-script.py")},
			"bad value":      {"exec", "--json", "--memory", "lots", "-c", "pass"},
			"bad rootfs":     {"exec", "--json", "--rootfs", "/no/such/dir", data("hello.py")},
		} {
			t.Run(name, func(t *testing.T) {
				out := r.exec(t, "", args...)
				m := rawResult(t, out)
				if m["status"] != string(nsjail.StatusSetupError) || out.code != nsjail.ExitSbxFailed {
					t.Fatalf("status %v exit %d, want setup_error 125", m["status"], out.code)
				}
				checkShapes(t, m)
			})
		}
		out := r.exec(t, "", "exec", "--json", data("hello.py"))
		checkShapes(t, rawResult(t, out))
	})
}

// TestBadFlagGivesJSON: under --json, wherever it stands before "--", a
// flag sbx cannot parse still gives one setup_error Result on stdout (and
// the one-line reason on stderr), so that an embedding caller always has a
// Result to parse (issue 19, point 3).
func TestBadFlagGivesJSON(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, tc := range []struct {
			name string
			args []string
			want string // in the message
		}{
			{"unknown flag", []string{"exec", "--bogus", "--json", "-c", "pass"}, "bogus"},
			{"bad bool", []string{"exec", "--json", "--debug-timings=maybe", "-c", "pass"}, "maybe"},
			{"missing value", []string{"exec", "--json", "--profile"}, "profile"},
			{"bad value", []string{"exec", "--json", "--memory", "1.5", "-c", "pass"}, "memory"},
			{"missing script", []string{"exec", data("no-such-script.py"), "--json"}, "no-such-script.py"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out := r.exec(t, "", tc.args...)
				if out.code != nsjail.ExitSbxFailed {
					t.Errorf("exit %d, want 125", out.code)
				}
				m := rawResult(t, out)
				checkShapes(t, m)
				msg, _ := m["message"].(string)
				if m["status"] != string(nsjail.StatusSetupError) || m["exit_code"] != float64(nsjail.ExitSbxFailed) || !strings.Contains(msg, tc.want) {
					t.Errorf("status %v exit_code %v message %q, want setup_error 125 naming %q", m["status"], m["exit_code"], msg, tc.want)
				}
				if id, _ := m["id"].(string); id == "" {
					t.Errorf("no id")
				}
				if !strings.HasPrefix(out.stderr, "sbx: ") || !strings.Contains(out.stderr, tc.want) {
					t.Errorf("stderr %q, want the reason", out.stderr)
				}
			})
		}
		// Without --json, or with it only among the payload's arguments,
		// stdout stays the payload's: nothing is printed there.
		for _, args := range [][]string{
			{"exec", "--bogus", "-c", "pass"},
			{"exec", "--bogus", "--", "/bin/echo", "--json"},
		} {
			if out := r.exec(t, "", args...); out.code != nsjail.ExitSbxFailed || out.stdout != "" {
				t.Errorf("%v: exit %d stdout %q, want 125 and nothing", args, out.code, out.stdout)
			}
		}
	})
}

// TestProgramNotFound: a program that is not in the sandbox's root is not
// an `exit` of the payload: it is not_found (127), and one that cannot be
// executed is cannot_exec (126), each with a message naming it (issue 19,
// point 4).
func TestProgramNotFound(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, tc := range []struct {
			prog   string
			status nsjail.Status
			code   int
		}{
			{"nosuchprog", "not_found", nsjail.ExitNotFound},
			{"/no/such/prog", "not_found", nsjail.ExitNotFound},
			{"/etc/passwd", "cannot_exec", nsjail.ExitCannotExec},
		} {
			res, out := r.result(t, "--", tc.prog)
			if res.Status != tc.status || res.ExitCode != tc.code || out.code != tc.code || !strings.Contains(res.Message, tc.prog) {
				t.Errorf("-- %s: status %s exit_code %d exit %d message %q, want %s %d naming it", tc.prog, res.Status, res.ExitCode, out.code, res.Message, tc.status, tc.code)
			}
			term := r.exec(t, "", "exec", "--", tc.prog)
			if term.code != tc.code || !strings.Contains(term.stderr, "sbx: "+string(tc.status)+": ") || !strings.Contains(term.stderr, tc.prog) {
				t.Errorf("-- %s in a terminal: exit %d stderr %q, want %d and the reason", tc.prog, term.code, term.stderr, tc.code)
			}
		}
	})
}

// TestAuditIDIsResultID: the audit line names the run's id as the Result
// does, `id`, with the same value (issue 19, point 5).
func TestAuditIDIsResultID(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir, err := os.MkdirTemp("", "auditid-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o777)
		log := filepath.Join(dir, "audit.jsonl")
		var ids []string
		for _, args := range [][]string{{data("hello.py")}, {data("no-such-script.py")}} {
			res, _ := r.result(t, append([]string{"--audit-log", log}, args...)...)
			ids = append(ids, res.ID)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != len(ids) {
			t.Fatalf("%d audit lines for %d runs", len(lines), len(ids))
		}
		for i, line := range lines {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if _, ok := e["run_id"]; ok {
				t.Errorf("line %d still has run_id", i+1)
			}
			if e["id"] != ids[i] || ids[i] == "" {
				t.Errorf("line %d: id %v, want the Result's %q", i+1, e["id"], ids[i])
			}
		}
	})
}

// TestVersion: `sbx --version` and `sbx version` print one line with the
// version and commit the Makefile stamped in, and the Result, the audit
// line and doctor carry the same (issue 19, point 7).
func TestVersion(t *testing.T) {
	head := ""
	if os.Getenv("SBX_BIN") == "" {
		if b, err := exec.Command("git", "-C", repoDir, "rev-parse", "HEAD").Output(); err == nil {
			head = strings.TrimSpace(string(b))
		}
	}
	forEach(t, func(t *testing.T, r runner) {
		flag := r.exec(t, "", "--version")
		cmd := r.exec(t, "", "version")
		if flag.code != 0 || cmd.code != 0 || flag.stdout != cmd.stdout || !strings.HasPrefix(flag.stdout, "sbx version ") || strings.Count(flag.stdout, "\n") != 1 {
			t.Errorf("--version: exit %d %q %q; version: exit %d %q %q; want one equal line each", flag.code, flag.stdout, flag.stderr, cmd.code, cmd.stdout, cmd.stderr)
		}
		dir, err := os.MkdirTemp("", "version-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o777)
		log := filepath.Join(dir, "audit.jsonl")
		// Decoded by hand, so that this test also runs (and fails)
		// against a binary from before the fields existed.
		var res struct{ Version, Commit string }
		m := rawResult(t, r.exec(t, "", "exec", "--json", "--audit-log", log, "-c", "pass"))
		res.Version, _ = m["version"].(string)
		res.Commit, _ = m["commit"].(string)
		if res.Version == "" || res.Commit == "" {
			t.Fatalf("Result version %q commit %q", res.Version, res.Commit)
		}
		if head != "" && res.Commit != head {
			t.Errorf("Result commit %q, want the checkout's HEAD %s", res.Commit, head)
		}
		if want := "sbx version " + res.Version + " (commit " + res.Commit; !strings.HasPrefix(flag.stdout, want) {
			t.Errorf("--version %q, want it to start %q", flag.stdout, want)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if e["version"] != res.Version || e["commit"] != res.Commit {
			t.Errorf("audit version %v commit %v, want %s %s", e["version"], e["commit"], res.Version, res.Commit)
		}
		doc := r.exec(t, "", "doctor", "--json")
		var d map[string]any
		if err := json.Unmarshal([]byte(doc.stdout), &d); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, doc.stdout)
		}
		if d["version"] != res.Version || d["commit"] != res.Commit {
			t.Errorf("doctor version %v commit %v, want %s %s", d["version"], d["commit"], res.Version, res.Commit)
		}
		if text := r.exec(t, "", "doctor"); !strings.Contains(text.stdout, "sbx version "+res.Version) {
			t.Errorf("doctor's report does not say the version:\n%s", text.stdout)
		}
		if out := r.exec(t, "", "version", "--bogus"); out.code != nsjail.ExitSbxFailed || out.stderr != "sbx: unknown flag --bogus (see 'sbx version --help')\n" {
			t.Errorf("version --bogus: exit %d stderr %q", out.code, out.stderr)
		}
		if out := r.exec(t, "", "version", "extra"); out.code != nsjail.ExitSbxFailed || out.stdout != "" {
			t.Errorf("version extra: exit %d stdout %q", out.code, out.stdout)
		}
		// The usage hint names the command once.
		if bad := r.exec(t, "", "--bogus"); bad.code != nsjail.ExitSbxFailed || strings.Contains(bad.stderr, "sbx sbx") || !strings.Contains(bad.stderr, "'sbx --help'") {
			t.Errorf("sbx --bogus: exit %d stderr %q", bad.code, bad.stderr)
		}
	})
}

// TestDidYouMean: a misspelled flag or command gets the name probably
// meant, as a misspelled profile key does; `sbx profile show` alone shows
// the default profile; a bad `sbx profile X` points to `sbx profile
// --help` (issue 19, point 14).
func TestDidYouMean(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for _, tc := range []struct {
			args []string
			want []string // in stderr
		}{
			{[]string{"exec", "--memroy", "1G", "-c", "pass"}, []string{"--memroy", "did you mean --memory?", "'sbx exec --help'"}},
			{[]string{"exec", "--jsno", "-c", "pass"}, []string{"did you mean --json?"}},
			{[]string{"exce", "-c", "pass"}, []string{`"exce"`, "did you mean exec?", "'sbx --help'"}},
			{[]string{"profile", "shwo", "strict"}, []string{`"shwo"`, "did you mean show?", "'sbx profile --help'"}},
			{[]string{"profile", "show", "--jsno", "strict"}, []string{"did you mean --json?", "'sbx profile show --help'"}},
			{[]string{"profile", "show", "strict", "--jsno"}, []string{"did you mean --json?", "'sbx profile show --help'"}},
		} {
			out := r.exec(t, "", tc.args...)
			if out.code != nsjail.ExitSbxFailed || strings.Count(out.stderr, "\n") != 1 {
				t.Errorf("%v: exit %d stderr %q, want 125 and one line", tc.args, out.code, out.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.stderr, w) {
					t.Errorf("%v: stderr %q lacks %q", tc.args, out.stderr, w)
				}
			}
		}
		// Under --json the hint is in the Result's message too.
		m := rawResult(t, r.exec(t, "", "exec", "--json", "--timout", "5s", "-c", "pass"))
		if msg, _ := m["message"].(string); !strings.Contains(msg, "did you mean --timeout?") {
			t.Errorf("--json --timout: message %q", msg)
		}
		// Nothing close: no hint.
		if out := r.exec(t, "", "exec", "--zzzzzzzz", "-c", "pass"); strings.Contains(out.stderr, "did you mean") {
			t.Errorf("--zzzzzzzz: stderr %q", out.stderr)
		}
		def := r.exec(t, "", "profile", "show")
		named := r.exec(t, "", "profile", "show", "standard")
		if def.code != 0 || def.stdout != named.stdout || !strings.HasPrefix(def.stdout, "# effective profile standard") {
			t.Errorf("profile show: exit %d stdout %.80q stderr %q, want the default profile", def.code, def.stdout, def.stderr)
		}
	})
}

// TestMessagesQuoteAndUnits: a refused flag value is quoted as typed, not
// as sbx parsed it, and limits are told in units, not byte counts (issue
// 19, point 6).
func TestMessagesQuoteAndUnits(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		out := r.exec(t, "", "exec", "--memory", "1.5", "-c", "pass")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, `--memory "1.5"`) {
			t.Errorf("--memory 1.5: exit %d stderr %q, want the value as typed", out.code, out.stderr)
		}
		res, _ := r.result(t, "--output-limit", "1M", "--output-policy", "kill", data("flood.py"), "100")
		if res.Status != nsjail.StatusOutputLimit || !strings.Contains(res.Message, "1 MiB") || strings.Contains(res.Message, "1048576") {
			t.Errorf("output kill: status %s message %q, want output_limit saying 1 MiB", res.Status, res.Message)
		}
		res, _ = r.result(t, "--memory", "128M", data("memory_bomb.py"))
		if enforcedByCgroup(res, "memory") && (!strings.Contains(res.Message, "128 MiB") || strings.Contains(res.Message, "134217728")) {
			t.Errorf("memory limit: message %q, want it to say 128 MiB", res.Message)
		}
	})
}

// TestCPUTimePrecise: cpu_ms is not counted in scheduler ticks (4 ms at
// HZ=250): it comes from the cgroup's ns counters or the rusage's µs, and
// user_ms + system_ms add up to it (issue 19, point 6).
func TestCPUTimePrecise(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		// With ns or µs counters a run's cpu_ms is a multiple of 4 one
		// time in four: 8 runs all multiples are a 1 in 65536 chance.
		var all []int64
		ticks := true
		for range 8 {
			res := r.okResult(t, nil, "-c", "sum(range(10**5))")
			u := res.Usage
			all = append(all, u.CPUMS)
			if u.CPUMS <= 0 || u.UserMS+u.SystemMS < u.CPUMS-1 || u.UserMS+u.SystemMS > u.CPUMS+1 {
				t.Errorf("usage %+v: want cpu_ms > 0 and user_ms + system_ms = cpu_ms (±1)", u)
			}
			ticks = ticks && u.CPUMS%4 == 0
		}
		if ticks {
			t.Errorf("cpu_ms of 8 runs %v: all multiples of 4 ms, the tick", all)
		}
	})
}

// TestInputDirTwice: a second --input-dir is refused, not silently won by
// the last (issue 19, point 8).
func TestInputDirTwice(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		a, b := filepath.Join(dataDir, "inputs-a"), filepath.Join(dataDir, "inputs-b")
		for _, d := range []string{a, b} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(d, 0o755)
			os.WriteFile(filepath.Join(d, filepath.Base(d)+".txt"), []byte("x"), 0o644)
		}
		out := r.exec(t, "", "exec", "--input-dir", a, "--input-dir", b, "-c", "pass")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "--input-dir given twice") ||
			!strings.Contains(out.stderr, a) || !strings.Contains(out.stderr, b) {
			t.Errorf("two --input-dir: exit %d stderr %q, want 125 naming both", out.code, out.stderr)
		}
		m := rawResult(t, r.exec(t, "", "exec", "--json", "--input-dir", a, "--input-dir", b, "-c", "pass"))
		if m["status"] != string(nsjail.StatusSetupError) {
			t.Errorf("two --input-dir under --json: status %v", m["status"])
		}
		// One is still fine, and so is a directory with a comma in its name.
		comma := filepath.Join(dataDir, "in,puts")
		os.MkdirAll(comma, 0o755)
		os.WriteFile(filepath.Join(comma, "x.txt"), []byte("x"), 0o644)
		if out := r.exec(t, "", "exec", "--input-dir", comma, "-c", "print(open('x.txt').read())"); out.code != 0 || out.stdout != "x\n" {
			t.Errorf("--input-dir %s: exit %d stdout %q stderr %q", comma, out.code, out.stdout, out.stderr)
		}
	})
}

// resultSchema is the JSON type of every field of the Result, per
// DESIGN.md "Result": "list", "object", "string", "number", "bool", with
// "|null" where null means "not known / not there", and "?" where the
// field is absent when empty. A field added to the Result must be added
// here, with its type.
var resultSchema = map[string]string{
	"id": "string", "profile": "string", "version": "string", "commit": "string",
	"started_at": "string", "finished_at": "string",
	"status": "string", "exit_code": "number", "signal": "string|null", "message": "string",
	"stdout": "string", "stderr": "string", "stdout_truncated": "bool", "stderr_truncated": "bool",
	"stdout_bytes": "number", "stderr_bytes": "number",
	"usage": "object", "limits": "object", "layers": "object", "pids_limit_hit": "bool",
	"inputs": "list", "files": "list", "files_truncated": "bool", "files_truncated_reason": "string?",
	"network": "list", "network_truncated": "bool", "network_summary": "object|null",
	"seccomp_denials": "list|null", "warnings": "list?",
	"image": "object?", "interpreter": "object?",
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// usageSchema and limitSchema are resultSchema for usage and for each
// entry of limits.
var usageSchema = map[string]string{
	"wall_ms": "number", "cpu_ms": "number", "user_ms": "number", "system_ms": "number",
	"peak_memory_bytes": "number", "pids_peak": "number|null", "pids_peak_source": "string?",
}

var limitSchema = map[string]string{
	"value": "number", "unit": "string", "enforced_by": "string", "note": "string?",
	"at_kill": "number?", "evidence": "string?",
}

// checkFields fails for each field of m missing from schema or not of its
// type, and for each field of schema m lacks (unless optional, "?").
func checkFields(t *testing.T, what string, m map[string]any, schema map[string]string) {
	t.Helper()
	for k, want := range schema {
		v, ok := m[k]
		optional := strings.HasSuffix(want, "?")
		want = strings.TrimSuffix(want, "?")
		switch got := jsonType(v); {
		case !ok && !optional:
			t.Errorf("%s: no %s", what, k)
		case ok && got != want && !strings.Contains("|"+want+"|", "|"+got+"|"):
			t.Errorf("%s: %s is %s (%v), want %s", what, k, got, v, want)
		}
	}
	for k := range m {
		if _, ok := schema[k]; !ok {
			t.Errorf("%s: field %s is not in the test's schema", what, k)
		}
	}
}

// TestResultContract runs one payload per status, as root and as uid
// 65534, and checks that each Result has every field with its schema type
// (issue 19, acceptance), and that the same payload gets the same status
// whichever identity runs it, whether a cgroup or rlimits enforce its
// limits (issue 19, point 1): a memory bomb is memory_limit, a fork bomb
// pids_limit with pids_limit_hit, and the Result names the evidence.
func TestResultContract(t *testing.T) {
	cases := []struct {
		status nsjail.Status
		args   []string
	}{
		{nsjail.StatusOK, []string{"-c", "pass"}},
		{nsjail.StatusExit, []string{data("exit3.py")}},
		{nsjail.StatusSignal, []string{"-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"}},
		{nsjail.StatusTimeout, []string{"--timeout", "0.5s", "-c", "import time; time.sleep(30)"}},
		{nsjail.StatusCPULimit, []string{"--cpu-time", cpuLimit(time.Second).String(), "--timeout", "20s", data("burn.py"), "1"}},
		{nsjail.StatusMemoryLimit, []string{"--profile", "strict", "-c", "bytearray(2*1024**3)"}},
		// Past any host's memory: refused at once under a cgroup too.
		{nsjail.StatusMemoryLimit, []string{"--profile", "strict", "-c", "bytearray(2**62)"}},
		// Generous time: importing numpy takes seconds of CPU in an
		// emulated VM (make vmtest).
		{nsjail.StatusMemoryLimit, []string{"--profile", "strict", "--cpu-time", "60s", "--timeout", "60s", "-c", "import numpy; numpy.ones(2**31)"}},
		{nsjail.StatusMemoryLimit, []string{"--memory", "128M", "--timeout", "20s", data("memory_bomb.py")}},
		{nsjail.StatusPidsLimit, []string{"--pids", "32", "--timeout", "20s", data("fork_bomb.py")}},
		{nsjail.StatusOutputLimit, []string{"--output-limit", "1M", "--output-policy", "kill", data("flood.py"), "100"}},
		// A system call through the x32 ABI: the filter's own kill (x32,
		// not int 0x80, which a kernel without IA32 emulation faults).
		{nsjail.StatusSeccomp, []string{data("x32.py")}},
		{"not_found", []string{"--", "nosuchprog"}},
		{"cannot_exec", []string{"--", "/etc/passwd"}},
		{nsjail.StatusSetupError, []string{data("no-such-script.py")}},
		{nsjail.StatusSetupError, []string{"--bogus", "-c", "pass"}},
	}
	// seen[i] is, per identity, what case i ended as.
	seen := make([]map[string]string, len(cases))
	for i := range seen {
		seen[i] = map[string]string{}
	}
	forEach(t, func(t *testing.T, r runner) {
		for i, tc := range cases {
			out := r.exec(t, "", append([]string{"exec", "--json"}, tc.args...)...)
			m := rawResult(t, out)
			what := fmt.Sprintf("%s %v", tc.status, tc.args)
			if m["status"] != string(tc.status) {
				t.Errorf("%v: status %v (%v), want %s", tc.args, m["status"], m["message"], tc.status)
			}
			checkFields(t, what, m, resultSchema)
			usage, _ := m["usage"].(map[string]any)
			checkFields(t, what+" usage", usage, usageSchema)
			if (usage["pids_peak"] == nil) != (usage["pids_peak_source"] == nil) {
				t.Errorf("%s: pids_peak %v with pids_peak_source %v", what, usage["pids_peak"], usage["pids_peak_source"])
			}
			ran := tc.status != nsjail.StatusSetupError && tc.status != "not_found" && tc.status != "cannot_exec"
			if ran && usage["pids_peak"] == nil {
				// The init counts the tasks when the payload ends.
				t.Errorf("%s: pids_peak null", what)
			}
			limits, _ := m["limits"].(map[string]any)
			for k, v := range limits {
				li, _ := v.(map[string]any)
				checkFields(t, what+" limits."+k, li, limitSchema)
			}
			evidence := func(key string) any {
				li, _ := limits[key].(map[string]any)
				return li["evidence"]
			}
			switch tc.status {
			case nsjail.StatusMemoryLimit:
				if e := evidence("memory"); e != string(nsjail.EvidenceOOMKill) && e != string(nsjail.EvidenceMemoryError) {
					t.Errorf("%s: limits.memory.evidence %v (%v)", what, e, limits["memory"])
				}
			case nsjail.StatusPidsLimit:
				if e := evidence("pids"); e != string(nsjail.EvidencePidsEvents) && e != string(nsjail.EvidenceTasksSampled) {
					t.Errorf("%s: limits.pids.evidence %v (%v)", what, e, limits["pids"])
				}
				if m["pids_limit_hit"] != true {
					t.Errorf("%s: pids_limit_hit %v", what, m["pids_limit_hit"])
				}
			default:
				for k := range limits {
					if e := evidence(k); e != nil {
						t.Errorf("%s: limits.%s.evidence %v, but no limit ended the run", what, k, e)
					}
				}
			}
			seen[i][r.name] = fmt.Sprintf("%v exit %d pids_limit_hit %v", m["status"], out.code, m["pids_limit_hit"])
		}
	})
	for i, by := range seen {
		var first, firstBy string
		for _, r := range runners() {
			got, ok := by[r.name]
			if !ok {
				continue // skipped: requireUserNS said why
			}
			if first == "" {
				first, firstBy = got, r.name
			} else if got != first {
				t.Errorf("%v: %s as %s, but %s as %s", cases[i].args, got, r.name, first, firstBy)
			}
		}
	}
}
