//go:build integration

package tests

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// probeSource is the payload of the test images: a static Go program (an
// image with no libc, no Python: nothing of the host's /usr can help it)
// that reports what it sees as JSON.
const probeSource = `package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	out := map[string]any{"env": os.Environ()}
	b, _ := os.ReadFile("/data/hello.txt")
	out["hello"] = string(b)
	_, err := os.Lstat("/data/gone")
	out["gone_exists"] = err == nil
	out["write_err"] = fmt.Sprint(os.WriteFile("/bin/planted", []byte("x"), 0o644))
	_, err = os.Stat("/usr/bin/python3")
	out["host_python"] = err == nil
	if st, err := os.Stat("/bin/su"); err == nil {
		out["su_mode"] = st.Mode().String()
	}
	out["args"] = os.Args[1:]
	json.NewEncoder(os.Stdout).Encode(out)
}
`

type probeOut struct {
	Env        []string `json:"env"`
	Hello      string   `json:"hello"`
	GoneExists bool     `json:"gone_exists"`
	WriteErr   string   `json:"write_err"`
	HostPython bool     `json:"host_python"`
	SuMode     string   `json:"su_mode"`
	Args       []string `json:"args"`
}

var probeOnce struct {
	sync.Once
	bin []byte
	err error
}

// probeBinary builds probeSource once, static (CGO_ENABLED=0).
func probeBinary(t *testing.T) []byte {
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sbx-probe-")
		if err != nil {
			probeOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		src := filepath.Join(dir, "main.go")
		os.WriteFile(src, []byte(probeSource), 0o644)
		out := filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, src)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			probeOnce.err = fmt.Errorf("go build probe: %v\n%s", err, b)
			return
		}
		probeOnce.bin, probeOnce.err = os.ReadFile(out)
	})
	if probeOnce.err != nil {
		t.Fatal(probeOnce.err)
	}
	return probeOnce.bin
}

type tarEnt struct {
	name, body, link string
	typ              byte
	mode             int64
}

func layerTar(t *testing.T, ents ...tarEnt) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return buf.Bytes()
}

// buildImage makes an image of layers, with an Env and a Cmd.
func buildImage(t *testing.T, env []string, layers ...[]byte) v1.Image {
	img := empty.Image
	for _, l := range layers {
		b := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Env = env
	cfg.Config.Cmd = []string{"/bin/probe", "from-cmd"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// probeImage: the probe, a file, a setuid file, and a file a second
// layer whites out.
func probeImage(t *testing.T, hello string) v1.Image {
	probe := probeBinary(t)
	l1 := layerTar(t,
		tarEnt{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		tarEnt{name: "bin/probe", typ: tar.TypeReg, mode: 0o755, body: string(probe)},
		tarEnt{name: "bin/su", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/false\n"},
		tarEnt{name: "data/hello.txt", typ: tar.TypeReg, mode: 0o644, body: hello},
		tarEnt{name: "data/gone", typ: tar.TypeReg, mode: 0o644, body: "x"},
		tarEnt{name: "dev/sda", typ: tar.TypeBlock, mode: 0o666},
	)
	l2 := layerTar(t, tarEnt{name: "data/.wh.gone", typ: tar.TypeReg, mode: 0o644})
	return buildImage(t, []string{"PATH=/bin:/opt/image/bin", "IMAGE_VAR=from-image", "HOME=/root", "LANG=C.UTF-8"}, l1, l2)
}

// testRegistry is go-containerregistry's in-memory registry on loopback.
// stall, when set, holds every blob GET of that digest after its first
// 64 KiB; swap serves another blob's bytes under a digest.
type testRegistry struct {
	host    string
	stall   atomic.Value // string digest
	swap    atomic.Value // swapBlob
	stalled chan struct{}
}

func startRegistry(t *testing.T) *testRegistry {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &testRegistry{host: ln.Addr().String(), stalled: make(chan struct{}, 16)}
	r.stall.Store("")
	r.swap.Store(swapBlob{})
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		stall, swap := r.stall.Load().(string), r.swap.Load().(swapBlob)
		if req.Method == http.MethodGet && swap.digest != "" && strings.HasSuffix(req.URL.Path, swap.digest) {
			// Chunked, with no Content-Length: the client learns the
			// bytes are wrong only from their digest.
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			w.Write(swap.body)
			return
		}
		if req.Method == http.MethodGet && stall != "" && strings.HasSuffix(req.URL.Path, stall) {
			rec := &bufferedResponse{header: http.Header{}}
			reg.ServeHTTP(rec, req)
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.code)
			body := rec.body.Bytes()
			n := min(len(body), 64<<10)
			w.Write(body[:n])
			w.(http.Flusher).Flush()
			r.stalled <- struct{}{}
			<-req.Context().Done()
			return
		}
		reg.ServeHTTP(w, req)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

type swapBlob struct {
	digest string
	body   []byte
}

type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = 200
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(c int) { b.code = c }

func (r *testRegistry) push(t *testing.T, repo string, img v1.Image) (ref string, digest string) {
	ref = r.host + "/" + repo
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return ref, d.String()
}

// storeHome is a store directory the runner owns, removed with the test.
func storeHome(t *testing.T, r runner) string {
	dir, err := os.MkdirTemp("", "sbx-store-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chown(dir, r.uid, r.uid)
	t.Cleanup(func() {
		// The trees are read-only on disk; the test runs as root (or
		// as their owner) and makes them writable to remove them.
		exec.Command("chmod", "-R", "u+w", dir).Run()
		os.RemoveAll(dir)
	})
	return dir
}

// sbxIn runs sbx as r with the store at home.
func sbxIn(t *testing.T, r runner, home string, args ...string) output {
	t.Helper()
	cmd := r.command(args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Env = append(os.Environ(), "SBX_HOME="+home, "SBX_TEST_LEAK_MARKER=leaked")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sbx %v: %v", args, err)
	}
	return output{so.String(), se.String(), code}
}

func resultIn(t *testing.T, r runner, home string, args ...string) *nsjail.Result {
	t.Helper()
	out := sbxIn(t, r, home, append([]string{"exec", "--json"}, args...)...)
	var res nsjail.Result
	dec := json.NewDecoder(strings.NewReader(out.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("sbx exec --json %v: bad Result (%v)\nstdout: %s\nstderr: %s", args, err, out.stdout, out.stderr)
	}
	return &res
}

func okProbe(t *testing.T, res *nsjail.Result) probeOut {
	t.Helper()
	if res.Status != nsjail.StatusOK {
		t.Fatalf("status %s (%s), want ok\nstdout: %s\nstderr: %s", res.Status, res.Message, res.Stdout, res.Stderr)
	}
	var p probeOut
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
		t.Fatalf("probe output: %v\n%s", err, res.Stdout)
	}
	return p
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// TestImagePullAndRun pulls an image from a registry on loopback and runs
// in it, as root and as uid 65534: its tree is the read-only root (no
// host /usr), its layers applied (whiteout, setuid stripped, device
// skipped), its Env under sbx's rules, its Cmd when nothing else is
// given, and the Result names its digest.
func TestImagePullAndRun(t *testing.T) {
	reg := startRegistry(t)
	ref, digest := reg.push(t, "t/probe:v1", probeImage(t, "hello from the image"))
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		out := sbxIn(t, r, home, "image", "pull", ref)
		if out.code != 0 || !strings.Contains(out.stdout, digest) {
			t.Fatalf("image pull: exit %d\nstdout: %s\nstderr: %s", out.code, out.stdout, out.stderr)
		}
		if out.stderr != "" {
			t.Errorf("image pull off a terminal printed %q, want nothing", out.stderr)
		}
		res := resultIn(t, r, home, "--image", ref, "--", "/bin/probe", "x")
		p := okProbe(t, res)
		if res.Image == nil || res.Image.Digest != digest || res.Image.Name != ref || !strings.HasPrefix(res.Image.ID, "sha256:") {
			t.Errorf("Result image = %+v, want name %s digest %s", res.Image, ref, digest)
		}
		if p.Hello != "hello from the image" || p.GoneExists || p.HostPython {
			t.Errorf("probe saw hello %q, gone %v, host python %v", p.Hello, p.GoneExists, p.HostPython)
		}
		if !strings.Contains(p.WriteErr, "read-only file system") {
			t.Errorf("write to /bin: %q, want read-only file system", p.WriteErr)
		}
		if res.Image != nil {
			if _, err := os.Lstat(filepath.Join(home, "images", strings.TrimPrefix(res.Image.ID, "sha256:"), "rootfs/dev/sda")); !os.IsNotExist(err) {
				t.Errorf("the image's block device was made in the store: %v", err)
			}
		}
		if p.SuMode != "-r-xr-xr-x" {
			t.Errorf("/bin/su mode %s, want the setuid bit stripped (-r-xr-xr-x)", p.SuMode)
		}
		env := strings.Join(p.Env, "\n")
		for _, want := range []string{"PATH=/bin:/opt/image/bin", "IMAGE_VAR=from-image", "HOME=/workspace"} {
			if !strings.Contains(env, want) {
				t.Errorf("env lacks %s:\n%s", want, env)
			}
		}
		if strings.Contains(env, "HOME=/root") || strings.Contains(env, "leaked") {
			t.Errorf("env has the image's HOME or the host's variables:\n%s", env)
		}
		// Nothing to run: the image's Cmd.
		p = okProbe(t, resultIn(t, r, home, "--image", ref))
		if len(p.Args) != 1 || p.Args[0] != "from-cmd" {
			t.Errorf("with nothing to run, args %v, want the image's Cmd", p.Args)
		}
		// A profile's image key, by the name the store has.
		prof := filepath.Join(home, "img.toml")
		os.WriteFile(prof, []byte(fmt.Sprintf("extends = \"standard\"\nimage = %q\n", ref)), 0o644)
		okProbe(t, resultIn(t, r, home, "--profile", prof, "--", "/bin/probe"))
		// doctor's trial sandbox on the image: it builds and runs,
		// and finds no python3 there (the probe image has none).
		out = sbxIn(t, r, home, "doctor", "--json", "--image", ref)
		if !strings.Contains(out.stdout, `"image python3"`) || !strings.Contains(out.stdout, "no python3 in it") {
			t.Errorf("doctor --image: exit %d\n%s%s", out.code, out.stdout, out.stderr)
		}
		// ls, inspect, rm, prune.
		out = sbxIn(t, r, home, "image", "ls")
		if !strings.Contains(out.stdout, ref) {
			t.Errorf("image ls:\n%s", out.stdout)
		}
		out = sbxIn(t, r, home, "image", "inspect", ref)
		if !strings.Contains(out.stdout, digest) || !strings.Contains(out.stdout, "IMAGE_VAR=from-image") || strings.Contains(out.stdout, `"python"`) {
			t.Errorf("image inspect:\n%s%s", out.stdout, out.stderr)
		}
		if out = sbxIn(t, r, home, "image", "rm", ref); out.code != 0 || !strings.Contains(out.stdout, "removed") {
			t.Errorf("image rm: exit %d: %s%s", out.code, out.stdout, out.stderr)
		}
		if got := entries(t, filepath.Join(home, "images")); len(got) != 0 {
			t.Errorf("images/ after rm: %v", got)
		}
		if out = sbxIn(t, r, home, "image", "inspect", ref); out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "not in the store") {
			t.Errorf("inspect after rm: exit %d: %s", out.code, out.stderr)
		}
		// As root, a store the sandbox's host uid cannot search is said
		// up front, naming the directory.
		if r.uid == 0 {
			os.Chmod(home, 0o700)
			res := resultIn(t, r, home, "--image", ref, "--", "/bin/probe")
			os.Chmod(home, 0o755)
			if res.Status != nsjail.StatusSetupError || !strings.Contains(res.Message, home+" is mode 0700, not searchable") {
				t.Errorf("a 0700 store as root: %s: %s", res.Status, res.Message)
			}
		}
		// A bare name not in the store is never pulled.
		if res := resultIn(t, r, home, "--image", "never-imported", "--", "/bin/probe"); res.Status != nsjail.StatusSetupError ||
			!strings.Contains(res.Message, "not in the store") || strings.Contains(res.Message, "pulling") {
			t.Errorf("a bare name not stored: %s: %s", res.Status, res.Message)
		}
		// A tagged reference not in the store is pulled on first use.
		res = resultIn(t, r, home, "--image", ref, "--", "/bin/probe")
		okProbe(t, res)
		if out = sbxIn(t, r, home, "image", "prune"); out.code != 0 {
			t.Errorf("prune: %s", out.stderr)
		}
		if got := entries(t, filepath.Join(home, "images")); len(got) != 1 {
			t.Errorf("prune removed a named image: images/ = %v", got)
		}
	})
}

// TestImageImport imports a docker save tarball and an OCI archive made
// in the test, and runs on each.
func TestImageImport(t *testing.T) {
	img := probeImage(t, "imported")
	dir := readableTempDir(t)
	tag, _ := name.NewTag("example.org/t/imported:v1")
	docker := filepath.Join(dir, "docker.tar")
	if err := tarball.WriteToFile(docker, tag, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "oci.tar")
	if out, err := exec.Command("tar", "-C", lay, "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	os.Chmod(docker, 0o644)
	os.Chmod(archive, 0o644)
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		for _, tc := range []struct{ file, as, name string }{
			{docker, "", "example.org/t/imported:v1"},
			{archive, "oci-one", "oci-one"},
		} {
			out := sbxIn(t, r, home, append(append([]string{"image", "import"}, nameFlag(tc.as)...), tc.file)...)
			if out.code != 0 {
				t.Fatalf("import %s: exit %d: %s", tc.file, out.code, out.stderr)
			}
			res := resultIn(t, r, home, "--image", tc.name, "--", "/bin/probe")
			if p := okProbe(t, res); p.Hello != "imported" {
				t.Errorf("%s: hello %q", tc.file, p.Hello)
			}
		}
		// One image, two names: one tree.
		if got := entries(t, filepath.Join(home, "images")); len(got) != 1 {
			t.Errorf("images/ = %v, want one tree for both imports", got)
		}
		if got := entries(t, filepath.Join(home, "tmp")); len(got) != 0 {
			t.Errorf("tmp/ = %v after the imports", got)
		}
	})
}

// readableTempDir is a temporary directory uid 65534 can read (t.TempDir
// is below a 0700 directory).
func readableTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sbx-image-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func nameFlag(as string) []string {
	if as == "" {
		return nil
	}
	return []string{"--name", as}
}

// TestImageHostileLayerRefused imports tarballs whose layers try to write
// outside the store: each import is refused (exit 125, naming the
// entry), nothing is written outside, and nothing is left in the store.
func TestImageHostileLayerRefused(t *testing.T) {
	dir := readableTempDir(t)
	victim := filepath.Join(dir, "victim")
	os.Mkdir(victim, 0o777)
	// A 10 GB entry, declared by its header alone (sparse or not, its
	// size counts): refused before a byte of it is written.
	var sparse bytes.Buffer
	tw := tar.NewWriter(&sparse)
	tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Mode: 0o644, Size: 10 << 30})
	tw.Flush()
	cases := []struct {
		layer []byte
		want  string
	}{
		{layerTar(t, tarEnt{name: "../../../../../.." + victim + "/dotdot", typ: tar.TypeReg, body: "x", mode: 0o644}), `".." in name`},
		{layerTar(t, tarEnt{name: "out", typ: tar.TypeSymlink, link: victim}, tarEnt{name: "out/viasymlink", typ: tar.TypeReg, body: "x", mode: 0o644}), "make its directory"},
		{layerTar(t, tarEnt{name: "h", typ: tar.TypeLink, link: victim + "/../victim/x"}), "hardlink"},
		{layerTar(t, tarEnt{name: "a/.wh...", typ: tar.TypeReg}), "not a name"},
		{sparse.Bytes(), "size 10737418240, more than 4294967296 for one entry"},
	}
	for i, tc := range cases {
		img := buildImage(t, nil, tc.layer)
		file := filepath.Join(dir, fmt.Sprintf("hostile%d.tar", i))
		tag, _ := name.NewTag(fmt.Sprintf("example.org/hostile:%d", i))
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			t.Fatal(err)
		}
		os.Chmod(file, 0o644)
	}
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		for i, tc := range cases {
			out := sbxIn(t, r, home, "image", "import", filepath.Join(dir, fmt.Sprintf("hostile%d.tar", i)))
			if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, tc.want) {
				t.Errorf("hostile%d: exit %d, stderr %q; want 125 and %q", i, out.code, out.stderr, tc.want)
			}
		}
		if got := entries(t, victim); len(got) != 0 {
			t.Errorf("written outside the store: %v", got)
		}
		if got := append(entries(t, filepath.Join(home, "images")), entries(t, filepath.Join(home, "tmp"))...); len(got) != 0 {
			t.Errorf("a refused image left %v in the store", got)
		}
	})
}

// TestImagePullDigestMismatch: a registry that serves another valid
// layer's bytes under a layer's digest is refused, and nothing is stored.
func TestImagePullDigestMismatch(t *testing.T) {
	reg := startRegistry(t)
	img := probeImage(t, "tampered")
	ref, _ := reg.push(t, "t/tampered:v1", img)
	layers, _ := img.Layers()
	d, _ := layers[1].Digest()
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := io.ReadAll(rc)
	rc.Close()
	reg.swap.Store(swapBlob{digest: d.String(), body: other})
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		out := sbxIn(t, r, home, "image", "pull", ref)
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "verifying sha256 checksum") && !strings.Contains(out.stderr, "digest mismatch") {
			t.Fatalf("pull of a tampered layer: exit %d, stderr %q; want 125 and a digest error", out.code, out.stderr)
		}
		t.Logf("refused: %s", out.stderr)
		if got := append(entries(t, filepath.Join(home, "images")), entries(t, filepath.Join(home, "tmp"))...); len(got) != 0 {
			t.Errorf("a refused pull left %v", got)
		}
	})
}

// TestImagePullInterruptedAndParallel kills a pull half-way (SIGKILL, as
// an OOM kill or a power cut would): nothing is visible, and the next
// pull completes and clears the leftover. Then two pulls of one image at
// once end with one copy.
func TestImagePullInterruptedAndParallel(t *testing.T) {
	reg := startRegistry(t)
	img := probeImage(t, "big enough to stall")
	ref, digest := reg.push(t, "t/stall:v1", img)
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		reg.stall.Store(d.String())
		cmd := r.command("image", "pull", ref)
		cmd.Env = append(os.Environ(), "SBX_HOME="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reg.stalled:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the pull never reached the stalled layer")
		}
		// The tree is being unpacked in tmp/ now; kill sbx (the child
		// of setpriv, which exec'd it: the same pid).
		deadline := time.Now().Add(30 * time.Second)
		for len(entries(t, filepath.Join(home, "tmp"))) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		reg.stall.Store("")
		if got := entries(t, filepath.Join(home, "tmp")); len(got) == 0 {
			t.Fatal("the killed pull left no tmp/ entry: it was not killed mid-unpack")
		}
		if got := entries(t, filepath.Join(home, "images")); len(got) != 0 {
			t.Fatalf("a killed pull is visible: images/ = %v", got)
		}
		if out := sbxIn(t, r, home, "image", "inspect", ref); out.code == 0 {
			t.Fatalf("a killed pull is visible to inspect:\n%s", out.stdout)
		}
		// Two pulls at once, after the interrupted one.
		var wg sync.WaitGroup
		outs := make([]output, 2)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = sbxIn(t, r, home, "image", "pull", ref)
			}()
		}
		wg.Wait()
		for _, out := range outs {
			if out.code != 0 || !strings.Contains(out.stdout, digest) {
				t.Fatalf("pull: exit %d: %s%s", out.code, out.stdout, out.stderr)
			}
		}
		if got := entries(t, filepath.Join(home, "images")); len(got) != 1 {
			t.Errorf("images/ = %v, want one copy", got)
		}
		if got := entries(t, filepath.Join(home, "tmp")); len(got) != 0 {
			t.Errorf("tmp/ = %v, want the leftover cleared", got)
		}
		okProbe(t, resultIn(t, r, home, "--image", ref, "--", "/bin/probe"))
	})
}

// hostPythonLayer copies the host's python3 (the binary, the libraries
// it links, the standard library without tests and caches) into a layer,
// with a module only the image has: a Python image built on this host,
// offline.
func hostPythonLayer(t *testing.T) []byte {
	bin, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skipf("no python3 on the host to build a Python image from: %v", err)
	}
	ver := strings.TrimPrefix(filepath.Base(bin), "python") // "3.11"
	stdlib := "/usr/lib/python" + ver
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(p string) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("lstat %s: %v", p, err)
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			t.Fatal(err)
		}
		h.Name = strings.TrimPrefix(p, "/")
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			tw.Write(b)
		}
	}
	skip := map[string]bool{"test": true, "__pycache__": true, "idlelib": true, "tkinter": true, "lib2to3": true,
		"ensurepip": true, "pydoc_data": true, "site-packages": true, "dist-packages": true}
	for _, top := range []string{"/bin", "/lib", "/lib64"} {
		if fi, err := os.Lstat(top); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			add(top) // merged /usr: bin -> usr/bin, ...
		}
	}
	add("/usr/bin/python3")
	add(bin)
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", bin, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			real, err := filepath.EvalSymlinks(f)
			if err != nil {
				t.Fatal(err)
			}
			if real != f {
				// The name the loader looks for, below its real
				// directory (/lib64 is usr/lib64), pointing at the file.
				d, err := filepath.EvalSymlinks(filepath.Dir(f))
				if err != nil {
					t.Fatal(err)
				}
				if at := filepath.Join(d, filepath.Base(f)); at != real {
					tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(at, "/"), Typeflag: tar.TypeSymlink, Linkname: real})
				}
			}
			add(real)
		}
	}
	filepath.WalkDir(stdlib, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skip[d.Name()] {
			return filepath.SkipDir
		}
		add(p)
		return nil
	})
	tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(stdlib, "/") + "/sbx_image_marker.py", Typeflag: tar.TypeReg, Mode: 0o644, Size: 17})
	tw.Write([]byte("WHERE = 'image'\n\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestImagePythonScript runs a Python script on an image that carries its
// own interpreter: the script, sent as usual, runs with the image's
// python3 (it imports a module only the image has), and nothing of the
// host's Python packages is there.
func TestImagePythonScript(t *testing.T) {
	reg := startRegistry(t)
	img := buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin", "PYTHONIOENCODING=utf-8"}, hostPythonLayer(t))
	ref, digest := reg.push(t, "t/python:v1", img)
	bin, _ := filepath.EvalSymlinks("/usr/bin/python3")
	v, err := exec.Command(bin, "-c", "import sys; print(sys.version.split()[0])").Output()
	if err != nil {
		t.Fatal(err)
	}
	hostVersion := strings.TrimSpace(string(v))
	dir := readableTempDir(t)
	script := filepath.Join(dir, "task.py")
	os.WriteFile(script, []byte(`import json, os, sys
import sbx_image_marker
print(json.dumps({"where": sbx_image_marker.WHERE, "exe": sys.executable,
    "host_packages": os.path.exists("/usr/lib/python3/dist-packages"),
    "ioenc": os.environ.get("PYTHONIOENCODING")}))
`), 0o644)
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		res := resultIn(t, r, home, "--image", ref, script)
		if res.Status != nsjail.StatusOK {
			t.Fatalf("status %s (%s)\nstdout: %s\nstderr: %s", res.Status, res.Message, res.Stdout, res.Stderr)
		}
		var got struct {
			Where, Exe, Ioenc string
			HostPackages      bool `json:"host_packages"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, res.Stdout)
		}
		if got.Where != "image" || got.HostPackages || got.Ioenc != "utf-8" {
			t.Errorf("the script saw %+v: want the image's Python, its Env, and no host packages", got)
		}
		if res.Image == nil || res.Image.Digest != digest {
			t.Errorf("Result image %+v, want digest %s", res.Image, digest)
		}
		// The interpreter, found once in a sandbox on the image when it
		// was pulled (here: on first use), resolved inside.
		if res.Interpreter == nil || res.Interpreter.Path != bin || res.Interpreter.Version != hostVersion {
			t.Errorf("Result interpreter %+v, want %s %s", res.Interpreter, bin, hostVersion)
		}
		// A payload that is not Python names no interpreter.
		if res := resultIn(t, r, home, "--image", ref, "--", "/usr/bin/python3", "-c", "pass"); res.Status != nsjail.StatusOK || res.Interpreter != nil {
			t.Errorf("a command payload: status %s, interpreter %+v", res.Status, res.Interpreter)
		}
	})
}

// TestImagePullProgressOnTerminal: on a terminal (script(1) gives the
// pull a pty), a pull draws its progress bar on stderr; off one it is
// quiet (TestImagePullAndRun).
func TestImagePullProgressOnTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) (util-linux) to give the pull a terminal")
	}
	reg := startRegistry(t)
	ref, digest := reg.push(t, "t/progress:v1", probeImage(t, "progress"))
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		argv := r.command("image", "pull", ref).Args
		var quoted []string
		for _, a := range argv {
			quoted = append(quoted, "'"+a+"'")
		}
		cmd := exec.Command("script", "-qec", strings.Join(quoted, " "), "/dev/null")
		cmd.Env = append(os.Environ(), "SBX_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pull on a pty: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "pulling "+ref+" [") || !strings.Contains(string(out), digest) {
			t.Errorf("pull on a terminal printed %q, want a progress bar and the digest", out)
		}
	})
}

// TestInterpreterOnHostRoot: a Python payload on the host's root names
// the python3 the sandbox's PATH finds, resolved (python3 -> python3.11),
// with the version its name says; a command payload names none.
func TestInterpreterOnHostRoot(t *testing.T) {
	bin, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skipf("no python3 on the host: %v", err)
	}
	want := strings.TrimPrefix(filepath.Base(bin), "python")
	forEach(t, func(t *testing.T, r runner) {
		res := r.okResult(t, nil, "-c", "pass")
		if res.Interpreter == nil || res.Interpreter.Path != bin || res.Interpreter.Version != want {
			t.Errorf("interpreter %+v, want %s %s", res.Interpreter, bin, want)
		}
		if res.Image != nil {
			t.Errorf("image %+v on the host's root", res.Image)
		}
		if res := r.okResult(t, nil, "--", "/bin/true"); res.Interpreter != nil {
			t.Errorf("a command payload names interpreter %+v", res.Interpreter)
		}
	})
}

// TestServeImageProfile: `sbx serve` runs a request on a profile whose
// image is set (the image is resolved in engine.Build, as for sbx exec):
// the code runs with the image's python3 (it imports a module only the
// image has), and the Result names the image and that interpreter.
func TestServeImageProfile(t *testing.T) {
	reg := startRegistry(t)
	img := buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t))
	ref, digest := reg.push(t, "t/serve-python:v1", img)
	bin, _ := filepath.EvalSymlinks("/usr/bin/python3")
	forEach(t, func(t *testing.T, r runner) {
		home := storeHome(t, r)
		if out := sbxIn(t, r, home, "image", "pull", ref); out.code != 0 {
			t.Fatalf("image pull: exit %d: %s%s", out.code, out.stdout, out.stderr)
		}
		prof := filepath.Join(home, "on-image.toml")
		if err := os.WriteFile(prof, []byte(fmt.Sprintf("extends = \"standard\"\nimage = %q\n", ref)), 0o644); err != nil {
			t.Fatal(err)
		}
		// The server finds the store where sbxIn put it (startServe
		// passes its environment on).
		t.Setenv("SBX_HOME", home)
		s := startServe(t, r, "", "--profiles", prof)
		res, _ := s.exec(map[string]any{"code": "import sbx_image_marker; print(sbx_image_marker.WHERE)"})
		if res.Status != nsjail.StatusOK || res.Stdout != "image\n" {
			t.Fatalf("on the profile's image: %s %q %q %q", res.Status, res.Message, res.Stdout, res.Stderr)
		}
		if res.Image == nil || res.Image.Digest != digest || res.Image.Name != ref {
			t.Errorf("Result image %+v, want %s digest %s", res.Image, ref, digest)
		}
		if res.Interpreter == nil || res.Interpreter.Path != bin {
			t.Errorf("Result interpreter %+v, want the image's %s", res.Interpreter, bin)
		}
		// Each run's Config released the image's shared lock when it
		// was answered: with the server still up, rm removes the tree
		// (a lock still held would leave it, "untagged").
		if out := sbxIn(t, r, home, "image", "rm", ref); out.code != 0 || !strings.Contains(out.stdout, "removed") {
			t.Errorf("image rm while the server runs: exit %d: %s%s", out.code, out.stdout, out.stderr)
		}
	})
}
