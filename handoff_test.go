package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestHandOffCommand: the lean sbx hands `sbx serve ...` and `sbx image
// ...` to the full one in each form the CLI would run them or their
// help, and nothing else.
func TestHandOffCommand(t *testing.T) {
	off := []string{"serve", "image"}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"sbx", "serve"}, "serve"},
		{[]string{"sbx", "serve", "--listen", "127.0.0.1:0"}, "serve"},
		{[]string{"sbx", "serve", "--help"}, "serve"},
		{[]string{"sbx", "--help", "serve"}, "serve"},
		{[]string{"sbx", "help", "serve"}, "serve"},
		{[]string{"sbx", "h", "serve"}, "serve"},
		{[]string{"/usr/local/bin/sbx", "serve"}, "serve"},
		{[]string{"sbx", "exec", "serve"}, ""},
		{[]string{"sbx", "exec", "--", "serve"}, ""},
		{[]string{"sbx", "help", "exec"}, ""},
		{[]string{"sbx", "help"}, ""},
		{[]string{"sbx", "help", "help", "serve"}, ""},
		{[]string{"sbx", "--", "serve"}, ""},
		{[]string{"sbx", "--version"}, ""},
		{[]string{"sbx"}, ""},
		{nil, ""},
		{[]string{"sbx", "__sbx_init"}, ""},
		{[]string{"sbx", "image", "pull", "python:3.11-slim"}, "image"},
		{[]string{"sbx", "image", "--help"}, "image"},
		{[]string{"sbx", "help", "image"}, "image"},
		{[]string{"sbx", "image"}, "image"},
		// exec --image is handed off once its profile is known
		// (execAction), never from argv.
		{[]string{"sbx", "exec", "--image", "python:3.11-slim", "-c", "pass"}, ""},
		{[]string{"sbx", "exec", "image"}, ""},
	} {
		if got := handOffCommand(tc.argv, off); got != tc.want {
			t.Errorf("handOffCommand(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
	if got := handOffCommand([]string{"sbx", "serve"}, nil); got != "" {
		t.Errorf("the full sbx hands %q off", got)
	}
}

// TestHandedOffCommandsAreRegistered: every command the lean sbx hands
// off is one `sbx --help` lists, in both builds (go test -tags sbx_lean
// runs this against the lean CLI), and the full CLI hands nothing off.
func TestHandedOffCommandsAreRegistered(t *testing.T) {
	var names []string
	for _, c := range newApp(nil).Commands {
		names = append(names, c.Name)
	}
	for _, c := range handedOff {
		if !slices.Contains(names, c) {
			t.Errorf("%s is handed off but not a command of the CLI (%v)", c, names)
		}
	}
	if build == buildFull && len(handedOff) > 0 {
		t.Errorf("the full sbx hands %v off", handedOff)
	}
	for _, c := range []string{serveName, imageName} {
		if build == buildLean && !slices.Contains(handedOff, c) {
			t.Errorf("the lean sbx does not hand %s off", c)
		}
	}
}

// leanForbidden are packages the lean sbx must not link: what only `sbx
// serve` and images use, whose package inits and pages every `sbx exec`
// paid before (internal/fullbin, engine/image_lean.go). Each prefix
// matches a package path and its subpackages.
var leanForbidden = []string{
	"github.com/sbx-sandbox/sbx/serve",
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"expvar",
	"github.com/sbx-sandbox/sbx/image",
	"github.com/google/go-containerregistry/",
	"github.com/opencontainers/",
	"github.com/klauspost/compress/",
	"github.com/docker/",
}

// TestLeanBuildLeavesServeOut lists the packages of the lean build (go
// list -deps -tags sbx_lean, the Makefile's tags) and fails on any of
// leanForbidden, and on a list without urfave/cli (the check would see
// nothing). tests/lean_test.go holds the built binary to the same rule.
func TestLeanBuildLeavesServeOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command (-short)")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for _, tags := range []string{"netgo,osusergo,urfave_cli_no_docs,sbx_precompiled,sbx_lean", "sbx_lean"} {
		cmd := exec.Command(gobin, "list", "-deps", "-tags", tags, ".")
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps -tags %s .: %v", tags, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/urfave/cli/v2") {
			t.Fatalf("go list -deps -tags %s . lists no urfave/cli: %v", tags, deps)
		}
		for _, d := range deps {
			for _, f := range leanForbidden {
				if d == strings.TrimSuffix(f, "/") || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("-tags %s: the lean sbx links %s", tags, d)
				}
			}
		}
	}
}
