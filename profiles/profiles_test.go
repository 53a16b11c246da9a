package profiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/rootfs"
)

// writeFiles writes name → content into a new temp dir and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// errLines returns the lines of every error of err, for exact comparison.
func errLines(err error) []string {
	var es Errors
	if !errors.As(err, &es) {
		if err == nil {
			return nil
		}
		return []string{"not Errors: " + err.Error()}
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

func TestBuiltinsLoad(t *testing.T) {
	names := Names()
	if strings.Join(names, " ") != "data standard strict" {
		t.Fatalf("built-ins = %v", names)
	}
	for _, n := range names {
		p, err := Load(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if p.Name != n || p.Description == "" {
			t.Errorf("%s: name %q, description %q", n, p.Name, p.Description)
		}
		if w := p.Warnings(); len(w) != 0 {
			t.Errorf("%s: a built-in turns a layer off: %v", n, w)
		}
		if _, err := p.Spec("id", nil); err != nil {
			t.Errorf("%s: Spec: %v", n, err)
		}
	}
}

// TestBuiltinValues pins the values the issue asks for.
func TestBuiltinValues(t *testing.T) {
	want := map[string]map[string]any{
		"strict": {
			"network.mode": "none", "seccomp.policy": "allowlist", "limits.memory": "256M",
			"limits.pids": int64(64), "limits.cpus": 1.0, "limits.cpu_time": "5s", "limits.wall_time": "10s",
			"limits.output": "1M", "limits.workspace_size": "64M",
		},
		"standard": {
			"network.mode": "none", "seccomp.policy": "denylist", "limits.memory": "1G",
			"limits.pids": int64(256), "limits.cpus": 2.0, "limits.cpu_time": "60s", "limits.wall_time": "120s",
			"limits.output": "10M", "limits.workspace_size": "512M",
		},
		"data": {
			"network.mode": "none", "seccomp.policy": "denylist", "limits.memory": "4G",
			"limits.workspace_size": "2G", "limits.wall_time": "900s",
		},
	}
	for name, keys := range want {
		p, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for key, v := range keys {
			if got := lookupField(key).value(p); !reflect.DeepEqual(got, v) {
				t.Errorf("%s %s = %#v, want %#v", name, key, got, v)
			}
		}
	}
	// The tmpfs mounts live in memory: data's must fit in its memory.
	d, _ := Load("data")
	if l := d.Limits; l.WorkspaceSize+l.TmpSize+l.ShmSize >= l.Memory {
		t.Errorf("data: workspace+tmp+shm %v >= memory %v", l.WorkspaceSize+l.TmpSize+l.ShmSize, l.Memory)
	}
}

// Defaults are standard's values, so that a file without extends is as
// safe as the default profile.
func TestStandardIsDefaults(t *testing.T) {
	s, err := Load("standard")
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	for i := range fields {
		f := &fields[i]
		if f.key == "description" {
			continue
		}
		if a, b := f.value(s), f.value(&d); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: standard has %v, Defaults() %v", f.key, a, b)
		}
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Defaults() are invalid: %v", err)
	}
}

// TestFieldTable checks the field table against the struct: every toml
// leaf is in it, in order, and each ptr points at its own field.
func TestFieldTable(t *testing.T) {
	var p Profile
	var keys []string
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := 0; i < v.NumField(); i++ {
			sf := v.Type().Field(i)
			tag := sf.Tag.Get("toml")
			if tag == "" || tag == "-" || sf.Type.Kind() == reflect.Map {
				continue
			}
			if sf.Type.Kind() == reflect.Struct {
				walk(v.Field(i), prefix+tag+".")
				continue
			}
			key := prefix + tag
			keys = append(keys, key)
			f := lookupField(key)
			if f == nil {
				t.Errorf("%s is not in the field table", key)
				continue
			}
			if got := reflect.ValueOf(f.ptr(&p)).Pointer(); got != v.Field(i).Addr().Pointer() {
				t.Errorf("%s: ptr points at another field", key)
			}
		}
	}
	walk(reflect.ValueOf(&p).Elem(), "")
	var table []string
	for _, f := range fields {
		table = append(table, f.key)
	}
	if strings.Join(keys, " ") != strings.Join(table, " ") {
		t.Errorf("struct order:\n  %v\nfield table:\n  %v", keys, table)
	}
}

// TestPrecedence: default < extends (recursively) < the profile < flags,
// each value with its origin; lists replace, env merges by name.
func TestPrecedence(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"base.toml": `extends = "standard"
require = ["cgroup"]
[limits]
memory = "512M"
pids = 100
cpus = 1.5
[filesystem]
ro_binds = ["/opt", "/srv"]
[env]
A = "base"
B = "base"
`,
		"sub/custom.toml": `extends = "../base.toml"
[limits]
memory = "768M"
pids = 99
[filesystem]
ro_binds = ["/opt"]
[env]
A = "custom"
`,
	})
	ref := filepath.Join(dir, "sub/custom.toml")
	p, err := Load(ref)
	if err != nil {
		t.Fatal(err)
	}
	err = p.ApplyFlags(func(name string) ([]string, bool) {
		if name == "memory" {
			return []string{"2G"}, true
		}
		return nil, false
	})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "sub/../base.toml")
	want := []struct {
		key   string
		value any
		from  string
	}{
		{"limits.memory", "2G", "flag --memory"},
		{"limits.pids", int64(99), ref + ":4"},
		{"limits.cpus", 1.5, base + ":6"},
		{"limits.wall_time", "120s", "standard:16"},
		{"filesystem.workspace", "/workspace", "default"},
		{"filesystem.ro_binds", []string{"/opt"}, ref + ":6"},
		{"require", []string{"cgroup"}, base + ":2"},
		{"extends", "../base.toml", ref + ":1"},
	}
	got := map[string]Setting{}
	for _, s := range p.Settings() {
		got[s.Key] = s
	}
	for _, w := range want {
		s := got[w.key]
		if !reflect.DeepEqual(s.Value, w.value) || s.Origin.String() != w.from {
			t.Errorf("%s = %#v from %s; want %#v from %s", w.key, s.Value, s.Origin, w.value, w.from)
		}
	}
	if p.Env["A"] != "custom" || p.Env["B"] != "base" || p.Origin("env.A").String() != ref+":8" || p.Origin("env.B").String() != base+":11" {
		t.Errorf("env = %v, A from %s, B from %s", p.Env, p.Origin("env.A"), p.Origin("env.B"))
	}
	if strings.Join(p.Chain(), " ") != ref+" "+base+" standard" {
		t.Errorf("chain = %v", p.Chain())
	}
	if p.Name != "custom" {
		t.Errorf("name = %q", p.Name)
	}
}

// TestLoadErrors: every error class, with the exact message. DIR stands
// for the files' directory.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		ref   string // default DIR/a.toml
		want  []string
	}{
		{
			name:  "unknown key",
			files: map[string]string{"a.toml": "description = \"x\"\n[limits]\nwall_tme = \"3s\"\n"},
			want:  []string{"profile DIR/a.toml: line 3: unknown key limits.wall_tme (did you mean limits.wall_time?)"},
		},
		{
			name:  "key in the wrong table",
			files: map[string]string{"a.toml": "memory = \"1G\"\n"},
			want:  []string{"profile DIR/a.toml: line 1: unknown key memory (did you mean limits.memory?)"},
		},
		{
			name:  "unknown table, reported once",
			files: map[string]string{"a.toml": "[limit]\nmemory = \"1G\"\npids = 3\n[nonsense]\nx = 1\n"},
			want: []string{
				"profile DIR/a.toml: line 1: unknown key limit (did you mean limits?)",
				"profile DIR/a.toml: line 4: unknown key nonsense",
			},
		},
		{
			name:  "bad unit",
			files: map[string]string{"a.toml": "[limits]\nmemory = \"12Q\"\ncpu_time = \"soon\"\n"},
			want: []string{
				`profile DIR/a.toml: line 2: limits.memory = "12Q": not a size (want a byte count, or a number with a unit K, M, G or T, powers of 1024: "256M", "1.5G")`,
				`profile DIR/a.toml: line 3: limits.cpu_time = "soon": not a duration (want "500ms", "1.5s", "2m", or a number of seconds)`,
			},
		},
		{
			name: "wrong types",
			files: map[string]string{"a.toml": "extends = 3\n[limits]\npids = \"many\"\nmemory = 1.5\nwall_time = true\ncpus = \"2\"\n" +
				"[filesystem]\nro_binds = \"/opt\"\nworkspace = [\"/w\"]\n[network]\nallow = [\"a.com\", 443]\n[env]\nA = 1\n"},
			want: []string{
				"profile DIR/a.toml: line 1: extends: want a string, got an integer",
				"profile DIR/a.toml: line 3: limits.pids: want an integer, got a string",
				`profile DIR/a.toml: line 4: limits.memory: want a size ("256M", "1.5G") or a byte count, got a float`,
				`profile DIR/a.toml: line 5: limits.wall_time: want a duration ("500ms", "1.5s", "2m") or a number of seconds, got a boolean`,
				"profile DIR/a.toml: line 6: limits.cpus: want a number, got a string",
				"profile DIR/a.toml: line 8: filesystem.ro_binds: want a list of strings, got a string",
				"profile DIR/a.toml: line 9: filesystem.workspace: want a string, got an array",
				"profile DIR/a.toml: line 11: network.allow: want a list of strings, got an integer in the list",
				"profile DIR/a.toml: line 13: env.A: want a string, got an integer",
			},
		},
		{
			name:  "tables and values swapped",
			files: map[string]string{"a.toml": "limits = 5\n[limits.memory]\nx = 1\n[env.PATH]\n[sandbox]\nuid = {a = 1}\n"},
			want: []string{
				"profile DIR/a.toml: line 1: limits: want a table, got an integer",
				`profile DIR/a.toml: line 2: limits.memory: want a size ("256M", "1.5G") or a byte count, got a table`,
				"profile DIR/a.toml: line 4: env.PATH: want a string, got a table",
				"profile DIR/a.toml: line 6: sandbox.uid: want an integer, got a table",
			},
		},
		{
			name:  "negative limits",
			files: map[string]string{"a.toml": "[limits]\nmemory = -5\ncpu_time = -1\nwall_time = \"-2s\"\npids = -1\ncpus = -0.5\nfsize = \"-1M\"\n"},
			want: []string{
				"profile DIR/a.toml: line 2: limits.memory = -5: must not be negative",
				"profile DIR/a.toml: line 3: limits.cpu_time = -1: must not be negative",
				`profile DIR/a.toml: line 4: limits.wall_time = "-2s": must not be negative`,
				"profile DIR/a.toml: line 5: limits.pids = -1: must be within 1..4194304",
				"profile DIR/a.toml: line 6: limits.cpus = -0.5: must be more than 0 and at most 1024",
				`profile DIR/a.toml: line 7: limits.fsize = "-1M": must not be negative`,
			},
		},
		{
			name: "out of range",
			files: map[string]string{"a.toml": "[limits]\npids = -1\ncpus = 0\nwall_time = 0\nmemory = \"512K\"\noutput_policy = \"drop\"\nnofile = 2000000\n" +
				"[network]\nmode = \"bridge\"\n[seccomp]\npolicy = \"off\"\n[sandbox]\nuid = 70000\nhostname = \"my host\"\n"},
			want: []string{
				"profile DIR/a.toml: line 2: limits.pids = -1: must be within 1..4194304",
				"profile DIR/a.toml: line 3: limits.cpus = 0: must be more than 0 and at most 1024",
				`profile DIR/a.toml: line 4: limits.wall_time = "0s": must be within 1ms..24h`,
				`profile DIR/a.toml: line 5: limits.memory = "512K": must be at least 1M`,
				`profile DIR/a.toml: line 6: limits.output_policy = "drop": want one of "truncate", "kill"`,
				"profile DIR/a.toml: line 7: limits.nofile = 2000000: must be within 1..1048576",
				`profile DIR/a.toml: line 9: network.mode = "bridge": want one of "none", "allow"`,
				`profile DIR/a.toml: line 11: seccomp.policy = "off": want one of "allowlist", "denylist", "none"`,
				"profile DIR/a.toml: line 13: sandbox.uid = 70000: must be within 0..65535",
				`profile DIR/a.toml: line 14: sandbox.hostname = "my host": ' ' is not allowed in a host name`,
			},
		},
		{
			// Past 2^53 a size would show rounded in the Result's JSON
			// numbers (units.MaxSize), as an integer or as a string.
			name:  "sizes past 2^53",
			files: map[string]string{"a.toml": "[limits]\nmemory = 9007199254740993\noutput = \"8193T\"\nworkspace_size = \"9007199254740992\"\n"},
			want: []string{
				"profile DIR/a.toml: line 2: limits.memory = 9007199254740993: too large (at most 8192T, 2^53 bytes)",
				`profile DIR/a.toml: line 3: limits.output = "8193T": too large (at most 8192T, 2^53 bytes)`,
			},
		},
		{
			name:  "signal and message queue limits",
			files: map[string]string{"a.toml": "[limits]\nsigpending = -1\nmsgqueue = \"-1K\"\n"},
			want: []string{
				"profile DIR/a.toml: line 2: limits.sigpending = -1: must be within 0..4194304",
				`profile DIR/a.toml: line 3: limits.msgqueue = "-1K": must not be negative`,
			},
		},
		{
			name:  "too many queued signals",
			files: map[string]string{"a.toml": "[limits]\nsigpending = 5000000\nmsgqueue = 0\n"},
			want:  []string{"profile DIR/a.toml: line 2: limits.sigpending = 5000000: must be within 0..4194304"},
		},
		{
			name: "paths, lists and env",
			files: map[string]string{"a.toml": "require = [\"cgroup\", \"gpu\"]\n[filesystem]\nworkspace = \"work\"\nrootfs = \"./root\"\nro_binds = [\"/proc/sys\"]\n" +
				"[network]\nallow = [\"a.com\", \"a.com\"]\n[env]\n\"A=B\" = \"x\"\nC = \"nul\\u0000\"\n"},
			want: []string{
				`profile DIR/a.toml: line 1: require = ["cgroup", "gpu"]: "gpu": want one of "cgroup", "seccomp", "landlock", "netns", "userns"`,
				`profile DIR/a.toml: line 3: filesystem.workspace = "work": must be a clean absolute path below /`,
				`profile DIR/a.toml: line 4: filesystem.rootfs = "./root": must be a clean absolute path (or empty for the host's /usr)`,
				`profile DIR/a.toml: line 5: filesystem.ro_binds = ["/proc/sys"]: "/proc/sys": /proc is the sandbox's own: sbx mounts a fresh procfs there, which would hide the bind or clash with it; bind at another path, e.g. "/proc/sys:/data"`,
				`profile DIR/a.toml: line 7: network.allow = ["a.com", "a.com"]: "a.com": listed twice`,
				`profile DIR/a.toml: line 9: env."A=B" = "x": a variable name must not contain "=" or a NUL byte`,
				`profile DIR/a.toml: line 10: env.C = "nul\u0000": must not contain a NUL byte`,
			},
		},
		{
			name:  "preload",
			files: map[string]string{"a.toml": "preload = [\"numpy\", \"matplotlib.pyplot\", \"os; import x\"]\n"},
			want:  []string{`profile DIR/a.toml: line 1: preload = ["numpy", "matplotlib.pyplot", "os; import x"]: "os; import x": not a module name: want dotted identifiers, e.g. "numpy" or "matplotlib.pyplot"`},
		},
		{
			name:  "preload twice",
			files: map[string]string{"a.toml": "preload = [\"numpy\", \"numpy\"]\n"},
			want:  []string{`profile DIR/a.toml: line 1: preload = ["numpy", "numpy"]: "numpy": listed twice`},
		},
		{
			name:  "allowlist without network",
			files: map[string]string{"a.toml": "[network]\nallow = [\"api.example.com\"]\n"},
			want:  []string{`profile DIR/a.toml: line 2: network.allow = ["api.example.com"]: hosts are listed but network.mode is "none" (set mode = "allow", or allow = [])`},
		},
		{
			name:  "duplicates",
			files: map[string]string{"a.toml": "[limits]\npids = 1\npids = 2\n[network]\n[limits]\n"},
			want: []string{
				"profile DIR/a.toml: line 3: limits.pids: already set on line 2",
				"profile DIR/a.toml: line 5: [limits]: table already defined on line 1",
			},
		},
		{
			name:  "integer too large",
			files: map[string]string{"a.toml": "[limits]\npids = 99999999999999999999\n"},
			want:  []string{"profile DIR/a.toml: line 2: limits.pids = 99999999999999999999: too large"},
		},
		{
			name:  "syntax error",
			files: map[string]string{"a.toml": "[limits]\npids = 1\nmemory = [\n"},
			want:  []string{"profile DIR/a.toml: line 3: invalid TOML: array is incomplete"},
		},
		{
			name:  "cyclic extends",
			files: map[string]string{"a.toml": "extends = \"b.toml\"\n", "b.toml": "\nextends = \"./a.toml\"\n"},
			want:  []string{`profile DIR/b.toml: line 2: extends = "./a.toml": cycle: DIR/a.toml -> DIR/b.toml -> DIR/a.toml`},
		},
		{
			name:  "extends itself",
			files: map[string]string{"a.toml": "extends = \"a.toml\"\n"},
			want:  []string{`profile DIR/a.toml: line 1: extends = "a.toml": cycle: DIR/a.toml -> DIR/a.toml`},
		},
		{
			name:  "missing file",
			files: map[string]string{},
			ref:   "DIR/missing.toml",
			want:  []string{"profile DIR/missing.toml: no such file or directory"},
		},
		{
			name:  "a directory",
			files: map[string]string{"d.toml/x": ""},
			ref:   "DIR/d.toml",
			want:  []string{"profile DIR/d.toml: is a directory"},
		},
		{
			name:  "missing built-in",
			files: map[string]string{},
			ref:   "nonesuch",
			want:  []string{"profile nonesuch: no such built-in profile (have: data, standard, strict; a file path needs a slash or a .toml suffix)"},
		},
		{
			name:  "missing extended file",
			files: map[string]string{"a.toml": "extends = \"base.toml\"\n"},
			want:  []string{`profile DIR/a.toml: line 1: extends = "base.toml": DIR/base.toml: no such file or directory`},
		},
		{
			name:  "missing extended built-in",
			files: map[string]string{"a.toml": "extends = \"stritc\"\n"},
			want:  []string{`profile DIR/a.toml: line 1: extends = "stritc": no such built-in profile (have: data, standard, strict; a file path needs a slash or a .toml suffix)`},
		},
		{
			name: "errors of the file and of what it extends",
			files: map[string]string{
				"a.toml":    "extends = \"base.toml\"\nbad = 1\n",
				"base.toml": "[limits]\nworse = 2\n",
			},
			want: []string{
				"profile DIR/a.toml: line 2: unknown key bad",
				"profile DIR/base.toml: line 2: unknown key limits.worse",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			ref := tc.ref
			if ref == "" {
				ref = "DIR/a.toml"
			}
			_, err := Load(strings.ReplaceAll(ref, "DIR", dir))
			got := errLines(err)
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], dir, "DIR")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// sbx exec promises one line on stderr: Errors reads as the first error
// and a count.
func TestErrorsOneLine(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.toml": "a = 1\nb = 2\nc = 3\n"})
	_, err := Load(filepath.Join(dir, "a.toml"))
	want := "profile " + dir + "/a.toml: line 1: unknown key a (and 2 more)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestBuiltinExtendsOnlyBuiltins(t *testing.T) {
	l := &loader{readFile: func(string) ([]byte, error) { t.Fatal("a file was read"); return nil, nil }}
	_, errs := l.loadChain(source{origin: Origin{Kind: FromBuiltin, Name: "x"}, id: "builtin:x"}, []byte(`extends = "/etc/passwd.toml"`), nil)
	want := `profile x: line 1: extends = "/etc/passwd.toml": a built-in profile can only extend another built-in`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errs = %v", errs)
	}
}

// A chain through a symlinked directory makes new paths forever; the
// depth bound stops it.
func TestExtendsDepthBound(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.toml": "extends = \"x/a.toml\"\n"})
	if err := os.Symlink(".", filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(filepath.Join(dir, "a.toml"))
	if err == nil || !strings.HasSuffix(err.Error(), `extends = "x/a.toml": more than 16 profiles extend each other`) {
		t.Errorf("err = %v", err)
	}
}

// The largest file sbx reads must load in linear time: a list of ~100k
// distinct entries, and ~100k unknown keys.
func TestLargeFileIsLinear(t *testing.T) {
	// gen builds a profile of about n bytes of each shape.
	gen := func(n int) map[string]string {
		var list, keys strings.Builder
		list.WriteString("[filesystem]\nro_binds = [")
		for i := 0; list.Len() < n-20; i++ {
			fmt.Fprintf(&list, "\"/%x\",", i)
		}
		list.WriteString("]\n")
		for i := 0; keys.Len() < n-20; i++ {
			fmt.Fprintf(&keys, "k%x=1\n", i)
		}
		return map[string]string{"list": list.String(), "keys": keys.String()}
	}
	// fastest is the best of two loads: the less disturbed by a loaded
	// machine.
	fastest := func(name, body string) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 2 {
			l := &loader{readFile: func(string) ([]byte, error) { return []byte(body), nil }}
			start := time.Now()
			_, err := l.load("big.toml")
			best = min(best, time.Since(start))
			if name == "list" && err != nil {
				t.Errorf("list: %v", err)
			}
		}
		return best
	}
	// Linear, not quadratic: 8 times the size may take about 8 times as
	// long, never 64. A ratio, not a wall-clock bound, so that a slow or
	// loaded machine (a -race build in CI) cannot fail it.
	small, big := gen(maxFileSize/8), gen(maxFileSize)
	for _, name := range []string{"list", "keys"} {
		s, b := fastest(name, small[name]), fastest(name, big[name])
		if ratio := float64(b) / float64(max(s, time.Microsecond)); ratio > 32 {
			t.Errorf("%s: 1M took %v, 128K %v: %.0f times, want about 8 (linear)", name, b, s, ratio)
		}
	}
}

func TestFileTooLarge(t *testing.T) {
	dir := writeFiles(t, map[string]string{"big.toml": "# " + strings.Repeat("x", maxFileSize) + "\n"})
	_, err := Load(filepath.Join(dir, "big.toml"))
	if want := "profile " + dir + "/big.toml: larger than 1M: not a profile"; err == nil || err.Error() != want {
		t.Errorf("err = %v", err)
	}
}

// TestUnitsInTOML: sizes as strings or byte counts; durations as strings
// or numbers of seconds (integers and floats); TOML number syntax.
func TestUnitsInTOML(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.toml": `[limits]
memory = 1_073_741_824
output = "1.5M"
tmp_size = 0x1000_0000
cpu_time = 5
wall_time = 1.5
shm_size = "64KiB"
cpus = 1
pids = +12
fsize = "2G"
`})
	p, err := Load(filepath.Join(dir, "a.toml"))
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limits
	if l.Memory != 1<<30 || l.Output != 3<<19 || l.TmpSize != 1<<28 || time.Duration(l.CPUTime) != 5*time.Second ||
		time.Duration(l.WallTime) != 1500*time.Millisecond || l.ShmSize != 64<<10 || l.CPUs != 1 || l.Pids != 12 || l.Fsize != 2<<30 {
		t.Errorf("limits = %+v", l)
	}
}

func TestFlags(t *testing.T) {
	apply := func(p *Profile, flags map[string][]string) error {
		return p.ApplyFlags(func(name string) ([]string, bool) {
			v, ok := flags[name]
			return v, ok
		})
	}
	cases := []struct {
		flags map[string][]string
		want  string
	}{
		{map[string][]string{"memory": {"12Q"}}, `--memory "12Q": not a size (want a byte count, or a number with a unit K, M, G or T, powers of 1024: "256M", "1.5G")`},
		{map[string][]string{"timeout": {"soon"}}, `--timeout "soon": not a duration (want "500ms", "1.5s", "2m", or a number of seconds)`},
		{map[string][]string{"pids": {"lots"}}, `--pids "lots": not an integer`},
		{map[string][]string{"pids": {"0"}}, `--pids "0": must be within 1..4194304`},
		{map[string][]string{"cpus": {"0"}}, `--cpus "0": must be more than 0 and at most 1024`},
		{map[string][]string{"cpus": {"NaN"}}, `--cpus "NaN": not a number`},
		{map[string][]string{"output-policy": {"drop"}}, `--output-policy "drop": want one of "truncate", "kill"`},
		{map[string][]string{"net": {"bridge"}}, `--net "bridge": want one of "none", "allow"`},
		{map[string][]string{"require": {"cgroup", "gpu"}}, `--require "cgroup,gpu": "gpu": want one of "cgroup", "seccomp", "landlock", "netns", "userns"`},
		{map[string][]string{"allow-host": {"a b"}}, `--allow-host "a b": allow pattern "a b": name "a b" has the invalid character ' '`},
		{map[string][]string{"allow-host": {"a.com:99999"}}, `--allow-host "a.com:99999": allow pattern "a.com:99999": port "99999" is not a number from 1 to 65535`},
	}
	for _, tc := range cases {
		p, _ := Load("strict")
		if err := apply(p, tc.flags); err == nil || err.Error() != tc.want {
			t.Errorf("%v: err = %v\nwant %s", tc.flags, err, tc.want)
		}
	}

	// --net none cuts the network whatever the profile or --allow-host
	// list; a file that lists hosts with mode "none" is refused (above).
	p, _ := Load("strict")
	p.Network.Allow = []string{"a.com"}
	if err := apply(p, map[string][]string{"net": {"none"}, "allow-host": {"b.com"}}); err != nil || p.Network.Mode != "none" {
		t.Errorf("--net none: %v, mode %q", err, p.Network.Mode)
	}

	// --allow-host means --net allow; lists replace; paths become absolute.
	p, _ = Load("strict")
	p.Network.Allow = []string{"old.example"}
	err := apply(p, map[string][]string{"allow-host": {"pypi.org", " *.example.com:443 ", ""}, "rootfs": {"rel/dir"}, "timeout": {"90"}})
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	if p.Network.Mode != "allow" || p.Origin("network.mode").String() != "flag --allow-host" ||
		strings.Join(p.Network.Allow, ",") != "pypi.org,*.example.com:443" || p.Origin("network.allow").String() != "flag --allow-host" ||
		p.Filesystem.Rootfs != filepath.Join(cwd, "rel/dir") || time.Duration(p.Limits.WallTime) != 90*time.Second {
		t.Errorf("after flags: %+v %+v %v", p.Network, p.Filesystem, p.Limits.WallTime)
	}
}

func TestFlagTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Flags {
		if lookupField(f.Key) == nil || seen[f.Name] || !strings.Contains(f.Usage, "`") || f.Category == "" {
			t.Errorf("flag %+v: unknown key, duplicate name, no `PLACEHOLDER` or no category", f)
		}
		seen[f.Name] = true
	}
	for _, name := range []string{"timeout", "cpu-time", "memory", "pids", "cpus", "output-limit", "output-policy",
		"workspace-size", "workspace-inodes", "tmp-size", "tmp-inodes", "nofile", "fsize", "rootfs", "net", "allow-host", "require"} {
		if !seen[name] {
			t.Errorf("no --%s", name)
		}
	}
	var mem Flag
	for _, f := range Flags {
		if f.Name == "memory" {
			mem = f
		}
	}
	if got := mem.DefaultText(); got != "profile's limits.memory; standard: 1G" {
		t.Errorf("DefaultText = %q", got)
	}
	// The texts computed once (defaultTexts) are each a fresh
	// computation's, from a Defaults() of its own.
	for _, f := range Flags {
		if got, want := f.DefaultText(), defaultText(f.Key, Defaults()); got != want {
			t.Errorf("--%s: DefaultText %q, computed afresh %q", f.Name, got, want)
		}
	}
}

func TestWarnings(t *testing.T) {
	dir := writeFiles(t, map[string]string{"weak.toml": `extends = "strict"
[seccomp]
policy = "none"
[network]
mode = "allow"
allow = ["pypi.org"]
[sandbox]
uid = 0
[filesystem]
ro_binds = ["/home/alice/models", "/var/run"]
[landlock]
mode = "off"
`})
	ref := filepath.Join(dir, "weak.toml")
	p, err := Load(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`seccomp.policy = "none" (` + ref + `:3): no syscall filter: the whole kernel interface is open to the payload, the usual way out of a sandbox`,
		`landlock.mode = "off" (` + ref + `:12): no Landlock ruleset: only the mounts keep the payload from writing outside the workspace and /tmp`,
		`network.mode = "allow" (` + ref + `:5): the payload can reach the hosts of network.allow through sbx's proxy`,
		`sandbox.uid = 0 (` + ref + `:8): the payload runs as root inside its user namespace; it is still unprivileged on the host, but one layer of defence is gone`,
		`filesystem.ro_binds = ["/home/alice/models", "/var/run"] (` + ref + `:10): "/home/alice/models" shows users' files (keys, tokens, history) to the payload`,
		`filesystem.ro_binds = ["/home/alice/models", "/var/run"] (` + ref + `:10): "/var/run" may hold daemons' sockets (docker.sock), which a read-only bind does not stop the payload from connecting to`,
	}
	if got := p.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestHostPatterns(t *testing.T) {
	check := func(allow ...string) string {
		p := Defaults()
		p.Network.Mode, p.Network.Allow = "allow", allow
		return checkAllow(&p)
	}
	good := []string{"a.com", "*.example.org", "api.example.com:8080", "10.0.0.7", "10.0.0.7:80", "[2001:db8::1]", "[::1]:443"}
	for _, s := range good {
		if r := check(s); r != "" {
			t.Errorf("%q refused: %s", s, r)
		}
	}
	for _, s := range []string{"", "*", "*.com", "api.*.com", "*a.com", "[2001:db8::1", "a.com:0", "http://a.com", "a.com/path", "ex ample.com"} {
		if r := check(s); !strings.Contains(r, fmt.Sprintf("%q", s)) {
			t.Errorf("%q: %q, want a refusal naming it", s, r)
		}
	}
}

// workspaceTops must agree with what rootfs.Plan accepts: profile
// validation is the early, located copy of the plan's rule.
func TestWorkspaceTopsMatchRootfs(t *testing.T) {
	plan := func(ws string) error {
		d := Defaults()
		_, err := rootfs.Plan(rootfs.Options{Workspace: ws, WorkspaceSize: 1 << 20, WorkspaceInodes: 10, TmpSize: 1 << 20, TmpInodes: 10, ShmSize: 1 << 20,
			Identity: rootfs.Identity{UID: 1000, GID: 1000, Hostname: d.Sandbox.Hostname, Home: ws}})
		return err
	}
	for _, top := range workspaceTops {
		ws := "/" + top + "/job"
		p := Defaults()
		p.Filesystem.Workspace = ws
		if err := p.Validate(); err != nil {
			t.Errorf("%s refused by the profile: %v", ws, err)
		}
		if err := plan(ws); err != nil {
			t.Errorf("%s accepted by the profile, refused by rootfs.Plan: %v", ws, err)
		}
	}
	for _, ws := range []string{"/usr/x", "/etc/x", "/tmp/x", "/proc/x", "/dev/x", "/bin"} {
		p := Defaults()
		p.Filesystem.Workspace = ws
		if p.Validate() == nil {
			t.Errorf("%s accepted by the profile", ws)
		}
		if plan(ws) == nil {
			t.Errorf("%s accepted by rootfs.Plan: the profile's rule is stricter than needed", ws)
		}
	}
}

func TestSpec(t *testing.T) {
	p, _ := Load("strict")
	p.Env = map[string]string{"A": "profile", "HOME": "/elsewhere"}
	s, err := p.Spec("id1", []string{"A=flag"})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(s.Env, " ")
	if s.Profile != "strict" || s.ID != "id1" || s.UID != 1000 || s.Hostname != "sbx" || s.Workdir != "/workspace" ||
		!strings.Contains(env, "A=flag") || !strings.Contains(env, "HOME=/elsewhere") {
		t.Errorf("spec = %+v", s)
	}
	// RLIMIT_CORE 1, not 0: the only value that stops a piped
	// core_pattern helper (core(5)).
	// RLIMIT_NICE and RLIMIT_RTPRIO 0: no real-time policy, no negative
	// nice value (nsjail.resetSchedOnFork).
	want := map[string]uint64{"RLIMIT_CORE": 1, "RLIMIT_NOFILE": 256, "RLIMIT_FSIZE": 64 << 20, "RLIMIT_SIGPENDING": 256, "RLIMIT_MSGQUEUE": 0,
		"RLIMIT_NICE": 0, "RLIMIT_RTPRIO": 0}
	for _, r := range s.Rlimits {
		if v, ok := want[r.Resource]; !ok || r.Soft != v || r.Hard != v {
			t.Errorf("rlimit %+v, want soft = hard = %d", r, v)
		}
		delete(want, r.Resource)
	}
	if len(want) > 0 {
		t.Errorf("rlimits %+v lack %v", s.Rlimits, want)
	}
}

// TestSpecImageEnv: an image's Env goes over sbx's base and under the
// profile's env and the flags, without the variables sbx owns.
func TestSpecImageEnv(t *testing.T) {
	p, _ := Load("standard")
	p.ImageEnv = []string{"PATH=/opt/bin:/usr/bin", "HOME=/root", "TMPDIR=/var/tmp", "HTTP_PROXY=http://corp:3128",
		"https_proxy=http://corp:3128", "LANG=de_DE.UTF-8", "PYTHONPATH=/app", "IMG=1", "notkv", "=x"}
	p.Env = map[string]string{"IMG": "profile"}
	s, err := p.Spec("id1", []string{"PYTHONPATH=/flag"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s twice in %v", k, s.Env)
		}
		got[k] = v
	}
	for k, want := range map[string]string{"PATH": "/opt/bin:/usr/bin", "HOME": "/workspace", "TMPDIR": "/tmp",
		"LANG": "de_DE.UTF-8", "PYTHONPATH": "/flag", "IMG": "profile", "HTTP_PROXY": "", "https_proxy": "", "notkv": "", "": ""} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q (env %v)", k, got[k], want, s.Env)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2"}, map[string]string{"B": "p", "C": "p"}, []string{"C=f", "D=f"})
	want := "A=1 B=p C=f D=f"
	if strings.Join(got, " ") != want {
		t.Fatalf("mergeEnv = %v, want %s", got, want)
	}
}

// TestShowRoundTrip: what `sbx profile show` prints loads back as the
// same profile, for every built-in and a file with awkward values.
func TestShowRoundTrip(t *testing.T) {
	dir := writeFiles(t, map[string]string{"odd.toml": `description = "quotes \" and \\ and tab\t and é"
[limits]
output = 1000
cpus = 0.25
wall_time = 0.0015
[env]
"A.B" = "x"
"sp ace" = "line\nbreak"
`})
	for _, ref := range append(Names(), filepath.Join(dir, "odd.toml")) {
		p, err := Load(ref)
		if err != nil {
			t.Fatal(err)
		}
		back := roundTrip(t, p)
		if !reflect.DeepEqual(values(back), values(p)) {
			t.Errorf("%s: printed and read back:\n  %v\nwas\n  %v", ref, values(back), values(p))
		}
	}
}

func roundTrip(t *testing.T, p *Profile) *Profile {
	t.Helper()
	var b strings.Builder
	for _, s := range p.Settings() {
		b.WriteString(s.Key + " = " + FormatValue(s.Value) + "\n")
	}
	l := &loader{readFile: func(string) ([]byte, error) { return []byte(b.String()), nil }}
	back, err := l.load("printed.toml")
	if err != nil {
		t.Fatalf("printed profile does not load: %v\n%s", err, b.String())
	}
	return back
}

func values(p *Profile) map[string]any {
	m := map[string]any{}
	for _, s := range p.Settings() {
		m[s.Key] = s.Value
	}
	return m
}

func TestOriginString(t *testing.T) {
	for o, want := range map[Origin]string{
		{Kind: FromDefault}:                          "default",
		{Kind: FromBuiltin, Name: "strict", Line: 9}: "strict:9",
		{Kind: FromFile, Name: "./x.toml", Line: 4}:  "./x.toml:4",
		{Kind: FromFlag, Name: "--memory"}:           "flag --memory",
	} {
		if got := o.String(); got != want {
			t.Errorf("%+v = %q, want %q", o, got, want)
		}
	}
}

func TestIsFile(t *testing.T) {
	for ref, want := range map[string]bool{"strict": false, "./strict": true, "strict.toml": true, "/abs/p": true, "dir/p": true} {
		if IsFile(ref) != want {
			t.Errorf("IsFile(%q) = %v", ref, !want)
		}
	}
}

// Loading a built-in is on every sandbox start.
func BenchmarkLoadBuiltin(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Load("strict"); err != nil {
			b.Fatal(err)
		}
	}
}
