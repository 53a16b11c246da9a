package spec

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/sbx-sandbox/sbx/"

// cgoFree are the packages that must build without cgo (issue 12, item 6):
// the contract, and the two that only need it, so that the profile parser
// and the audit log build without libseccomp and a Go client can import
// the types. None may reach what is banned: the seccomp package links
// libseccomp, nsjail holds the init and imports seccomp, cgroup and
// netproxy are host machinery. What they may import below a banned tree
// is listed here too (seccomp/policyname, netproxy/allowlist: the grammar
// the profile parser checks network.allow with, the proxy's own).
var banned = []string{"nsjail", "seccomp", "cgroup", "netproxy"}

var cgoFree = []string{"nsjail/spec", "seccomp/policyname", "netproxy/allowlist", "audit", "profiles"}

// goTool finds the go command the tests run under.
func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command in PATH or at %s: %v", p, err)
	}
	return p
}

// goCmd runs the go command in the module's root with cgo on or off and no
// inherited GOFLAGS (a -race in them needs cgo).
func goCmd(t *testing.T, cgo string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("CGO_ENABLED=%s go %s: %v\n%s", cgo, strings.Join(args, " "), err, stderr)
	}
	return out
}

// TestCgoFree builds the cgo-free packages with CGO_ENABLED=0 and checks,
// with cgo on (where a cgo import would show), that none of their
// dependencies outside the standard library has cgo files, and that none
// is one they must not reach.
func TestCgoFree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command (-short)")
	}
	var pkgs []string
	for _, c := range cgoFree {
		pkgs = append(pkgs, "./"+c)
	}
	goCmd(t, "0", append([]string{"build"}, pkgs...)...)
	for _, c := range cgoFree {
		out := goCmd(t, "1", "list", "-deps", "-json=ImportPath,Standard,CgoFiles", "./"+c)
		dec := json.NewDecoder(strings.NewReader(string(out)))
		n := 0
		for dec.More() {
			var p struct {
				ImportPath string
				Standard   bool
				CgoFiles   []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatalf("go list -deps %s: %v", c, err)
			}
			n++
			// The standard library's own cgo files (net's resolver)
			// have pure-Go twins that CGO_ENABLED=0 builds.
			if len(p.CgoFiles) > 0 && !p.Standard {
				t.Errorf("%s depends on %s, which uses cgo (%s)", c, p.ImportPath, strings.Join(p.CgoFiles, " "))
			}
			for _, b := range banned {
				if (p.ImportPath == module+b || strings.HasPrefix(p.ImportPath, module+b+"/")) && !isCgoFree(p.ImportPath) {
					t.Errorf("%s depends on %s", c, p.ImportPath)
				}
			}
		}
		if n == 0 {
			t.Errorf("go list -deps %s listed nothing", c)
		}
	}
}

// isCgoFree reports whether path is one of cgoFree's packages, which the
// others may import even below a banned tree.
func isCgoFree(path string) bool {
	for _, c := range cgoFree {
		if path == module+c {
			return true
		}
	}
	return false
}
