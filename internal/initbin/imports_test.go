package initbin

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

// initAllowed is every non-standard package the init binary may link:
// golang.org/x/sys, go-landlock (and the psx it imports, unused by the
// init, which restricts only its own thread), moby/sys/mountinfo, and
// sbx's own packages that the init or nsjail's supervisor half (linked,
// never run) need (internal/leanexec: for the order of internal/initbin's
// init, which does nothing in the init), none of them with a dependency beyond this list.
// No libseccomp, prometheus, go-containerregistry, urfave/cli, protobuf,
// compress or golang.org/x/net (issue 13).
var initAllowed = []string{
	"golang.org/x/sys/",
	"github.com/landlock-lsm/go-landlock/",
	"kernel.org/pub/linux/libs/security/libcap/psx",
	"github.com/moby/sys/mountinfo",
	module + "cmd/sbx-init",
	module + "nsjail",
	module + "nsjail/spec",
	module + "rootfs",
	module + "seccomp/install",
	module + "seccomp/policyname",
	module + "cgroup",
	module + "internal/initbin",
	module + "internal/kernel",
	module + "internal/leanexec",
	module + "internal/oserr",
	module + "internal/units",
	module + "internal/version",
}

// initForbidden is the standard library the init must not link, with
// why: each came in once through the supervisor's half of nsjail (linked,
// never run) and cost the image, which every sandbox copies into a memfd
// at ~0.4 ms of CPU per MB (docs/DESIGN.md, issue 13). Importing a
// package keeps its package init, and what that init references, even
// when nothing calls it.
var initForbidden = map[string]string{
	"image":                                  "the figures' PNG check is the supervisor's (figures_png.go)",
	"image/png":                              "the figures' PNG check is the supervisor's (figures_png.go)",
	"image/color":                            "image/png's",
	"compress/flate":                         "image/png's",
	"compress/zlib":                          "image/png's",
	"hash/adler32":                           "image/png's",
	"hash/crc32":                             "image/png's",
	"net":                                    "the proxy and egress listeners are served by the supervisor (proxy_serve_linux.go, egress_linux.go); the init makes its sockets with x/sys/unix",
	"vendor/golang.org/x/net/dns/dnsmessage": "net's",
	"net/netip":                              "spec.Forward's address is plain bytes (nsjail/spec/network.go); netip's init and the methods JSON keeps cost ~90 KB",
	"unique":                                 "net/netip's",
	"os/signal":                              "the init sets its dispositions with rt_sigaction (init_signal_linux.go): signal.Notify costs ~50 µs a signal",
}

func allowed(path string) bool {
	for _, a := range initAllowed {
		if path == a || strings.HasSuffix(a, "/") && strings.HasPrefix(path, a) {
			return true
		}
	}
	return false
}

// goCmd runs the go command in the module's root, with the environment
// the Makefile's sbx target builds sbx-init with.
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("CGO_ENABLED=0 go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// TestInitBinaryImports builds the init binary as the Makefile does
// (CGO_ENABLED=0, -tags sbx_init_only) and fails on any package it links
// outside the standard library and initAllowed: the init must stay a
// small, cgo-free program.
func TestInitBinaryImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command (-short)")
	}
	const tags = "netgo,osusergo,sbx_init_only"
	goCmd(t, "build", "-tags", tags, "-o", filepath.Join(t.TempDir(), "sbx-init"), "./cmd/sbx-init")
	out := goCmd(t, "list", "-tags", tags, "-deps", "-json=ImportPath,Standard,CgoFiles", "./cmd/sbx-init")
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var seen []string
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
			CgoFiles   []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list -deps ./cmd/sbx-init: %v", err)
		}
		seen = append(seen, p.ImportPath)
		if why, ok := initForbidden[p.ImportPath]; ok {
			t.Errorf("sbx-init links %s: %s", p.ImportPath, why)
		}
		if p.Standard {
			continue
		}
		if len(p.CgoFiles) > 0 {
			t.Errorf("sbx-init links %s, which uses cgo (%s)", p.ImportPath, strings.Join(p.CgoFiles, " "))
		}
		if !allowed(p.ImportPath) {
			t.Errorf("sbx-init links %s, which is not in initAllowed", p.ImportPath)
		}
	}
	// The list must be the init's: nsjail and the seccomp installer are in
	// it, libseccomp's binding is not.
	for _, want := range []string{module + "nsjail", module + "seccomp/install"} {
		if !contains(seen, want) {
			t.Errorf("go list -deps ./cmd/sbx-init does not list %s: %v", want, seen)
		}
	}
	if contains(seen, module+"seccomp") {
		t.Errorf("sbx-init links %sseccomp (libseccomp)", module)
	}
	// Standard packages only the supervisor needs, kept out because
	// every byte of the image is copied into a memfd per `sbx exec`
	// (~0.4 ms of CPU per MB) and every package init runs in every
	// sandbox: the figures' PNG check (nsjail/figures_png.go) brought
	// image/png, compress/flate and hash/crc32, 139 KB.
	for _, p := range []string{"image/png", "compress/flate", "hash/crc32"} {
		if contains(seen, p) {
			t.Errorf("sbx-init links %s, which only the supervisor uses", p)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
