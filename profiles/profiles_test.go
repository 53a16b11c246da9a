package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuiltinsLoad(t *testing.T) {
	for _, n := range Names() {
		p, err := Load(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if p.Description == "" {
			t.Errorf("%s has no description", n)
		}
		if _, err := p.Spec("id", nil); err != nil {
			t.Errorf("%s: Spec: %v", n, err)
		}
	}
	s, _ := Load("strict")
	if time.Duration(s.Limits.WallTime) != 10*time.Second || s.Limits.Output != 1<<20 || s.Limits.WorkspaceSize != 64<<20 {
		t.Errorf("strict limits: %+v", s.Limits)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	cases := map[string]string{
		write("unknown.toml", "description = \"x\"\n[limits]\nwall_tme = \"3s\"\n"): "line 3: unknown key limits.wall_tme",
		write("unit.toml", "[limits]\noutput = \"5X\"\n"):                           "line 2: limits.output",
		write("syntax.toml", "x = [\n"):                                             "line 1",
		write("neg.toml", "[limits]\nnofile = -1\n"):                                "limits.nofile: must be positive",
		filepath.Join(dir, "missing.toml"):                                          "no such file",
		"nonesuch":                                                                  "no such built-in profile",
	}
	for ref, want := range cases {
		_, err := Load(ref)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) = %v, want %q", ref, err, want)
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
