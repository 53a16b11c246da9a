//go:build integration

package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// outputCase is a scratch area for one run that writes --output-dir: the
// output dir itself, a canary file beside it, and a snapshot of the area
// to prove that nothing outside the output dir changed.
type outputCase struct {
	root, out, canary string
	before            map[string]string
}

const canarySecret = "sbx-canary-secret-3f1b"

func newOutputCase(t *testing.T) *outputCase {
	t.Helper()
	// Not t.TempDir: its parent is 0700, and uid 65534 must reach this.
	root, err := os.MkdirTemp("", "outcase-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	c := &outputCase{root: root, out: filepath.Join(root, "out"), canary: filepath.Join(root, "canary.txt")}
	if err := os.Mkdir(c.out, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(c.out, 0o777) // uid 65534 writes here too
	if err := os.WriteFile(c.canary, []byte(canarySecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.before = c.snapshot(t)
	return c
}

// snapshot lists everything under root except the output dir.
func (c *outputCase) snapshot(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.Walk(c.root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == c.out || strings.HasPrefix(p, c.out+"/") {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		m[p] = fmt.Sprintf("%v %d %d %v", fi.Mode(), fi.Size(), st.Nlink, fi.ModTime().UnixNano())
		return nil
	})
	return m
}

// check asserts the invariants every hostile case shares: the canary is
// untouched and unread, nothing outside the output dir changed, every
// file in the output dir is a plain 0644 file with a safe name.
func (c *outputCase) check(t *testing.T, res *nsjail.Result, raw string) {
	t.Helper()
	if after := c.snapshot(t); fmt.Sprint(after) != fmt.Sprint(c.before) {
		t.Errorf("something outside the output dir changed:\nbefore %v\nafter  %v", c.before, after)
	}
	if strings.Contains(raw, canarySecret) {
		t.Errorf("the canary's content reached the Result")
	}
	listed := map[string]nsjail.FileEntry{}
	for _, f := range res.Files {
		if f.CopiedTo != "" {
			listed[f.CopiedTo] = f
		}
	}
	hashes := map[uint64]string{} // inode -> sha256: hardlinks are read once
	filepath.Walk(c.out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == c.out {
			return nil
		}
		if fi.Mode().IsRegular() {
			// The Result does not lie about the output dir: every file
			// there is an entry's copy, with the entry's hash.
			f, ok := listed[p]
			ino := fi.Sys().(*syscall.Stat_t).Ino
			if _, done := hashes[ino]; !done {
				hashes[ino] = fileSHA256(t, p)
			}
			switch {
			case !ok:
				t.Errorf("%s (%d bytes) is in the output dir, but no entry says it was copied there", p, fi.Size())
			case f.SHA256 != hashes[ino] || f.Size != fi.Size():
				t.Errorf("%s: %d bytes, sha256 %s on disk; the Result says %d bytes, %s", p, fi.Size(), hashes[ino], f.Size, f.SHA256)
			}
		}
		name := filepath.Base(p)
		if !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
			t.Errorf("unsafe name on the host: %q", p)
		}
		switch {
		case fi.IsDir():
		case fi.Mode().IsRegular():
			if fi.Mode().Perm() != 0o644 || fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
				t.Errorf("%s has mode %v, want 0644", p, fi.Mode())
			}
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(canarySecret)) || bytes.Contains(b, []byte("root:x:0:0")) {
				t.Errorf("%s holds host content", p)
			}
		default:
			t.Errorf("%s is a %v on the host: only regular files may be written", p, fi.Mode().Type())
		}
		return nil
	})
}

func (c *outputCase) run(t *testing.T, r runner, args ...string) *nsjail.Result {
	t.Helper()
	res, out := r.result(t, append([]string{"--output-dir", c.out}, args...)...)
	if res.Status != nsjail.StatusOK || !strings.HasPrefix(res.Stdout, "done") {
		t.Fatalf("status %s (%s)\nstdout %q\nstderr %q\nsbx stderr %q", res.Status, res.Message, res.Stdout, res.Stderr, out.stderr)
	}
	c.check(t, res, out.stdout)
	return res
}

func byPath(res *nsjail.Result) map[string]nsjail.FileEntry {
	m := map[string]nsjail.FileEntry{}
	for _, f := range res.Files {
		m[f.Path] = f
	}
	return m
}

func TestOutputSymlinks(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "symlinks", c.canary)
		files := byPath(res)
		for _, name := range []string{"canary-abs", "canary-rel", "shadow", "environ", "root", "zero", "loop-a", "loop-b", "chain-0", "chain-40", "dir/up"} {
			if f := files[name]; f.Kind != "symlink" || f.CopiedTo != "" || f.Target == "" {
				t.Errorf("%s: %+v, want a recorded, uncopied symlink", name, f)
			}
		}
		if f := files["real.txt"]; f.Kind != "file" || f.CopiedTo == "" {
			t.Errorf("real.txt: %+v", f)
		}
		ents, _ := os.ReadDir(c.out)
		if len(ents) != 1 || ents[0].Name() != "real.txt" {
			t.Errorf("output dir holds %v, want only real.txt", ents)
		}
	})
}

func TestOutputSwapRace(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for i := 0; i < 3; i++ {
			c := newOutputCase(t)
			res := c.run(t, r, data("hostile.py"), "swap")
			for _, f := range res.Files {
				if f.CopiedTo != "" {
					if b, _ := os.ReadFile(f.CopiedTo); string(b) != "plain\n" {
						t.Errorf("%s copied as %q", f.Path, b)
					}
				}
			}
		}
	})
}

func TestOutputHardlinks(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "hardlinks")
		inodes := map[uint64]int64{}
		filepath.Walk(c.out, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				inodes[fi.Sys().(*syscall.Stat_t).Ino] = fi.Size()
			}
			return nil
		})
		var total int64
		for _, n := range inodes {
			total += n
		}
		if len(inodes) != 1 || total != 16<<20 {
			t.Errorf("output dir holds %d distinct files, %d bytes; want the 16 MiB content once", len(inodes), total)
		}
		// A consumer reading every file reads each link in full: the
		// cap counts those bytes (issue 11, finding 6).
		max := nsjail.DefaultOutputSpec().MaxBytes
		logical, disk := usage(c.out)
		t.Logf("output dir: %d bytes to read, %d on disk; cap %d", logical, disk, max)
		if logical > max || disk > max {
			t.Errorf("output dir: %d bytes to read, %d on disk, past the %d-byte cap", logical, disk, max)
		}
		if n := cappedEntries(res); n != 1000-int(max/(16<<20)) {
			t.Errorf("%d entries say the output cap stopped their copy, want %d", n, 1000-max/(16<<20))
		}
		if !res.FilesTruncated || len(res.Files) != 1000 {
			t.Errorf("%d entries, truncated %v: want the 1000-entry cap to end the listing", len(res.Files), res.FilesTruncated)
		}
	})
}

func TestOutputSpecialFiles(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "special")
		files := byPath(res)
		for name, kind := range map[string]string{"fifo": "fifo", "fifo-open": "fifo", "sock": "socket", "null": "symlink", "urandom": "symlink"} {
			if f := files[name]; f.Kind != kind || f.CopiedTo != "" {
				t.Errorf("%s: %+v, want an uncopied %s", name, f, kind)
			}
		}
		if ents, _ := os.ReadDir(c.out); len(ents) != 0 {
			t.Errorf("output dir holds %v, want nothing", ents)
		}
	})
}

func TestOutputSparseFile(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, "--profile", data("profiles/big-files.toml"), data("hostile.py"), "sparse")
		files := byPath(res)
		if f := files["sparse"]; f.Size != 1<<40 || f.CopiedTo != "" || f.Skipped == "" {
			t.Errorf("sparse: %+v, want listed with its size and skipped", f)
		}
		if f := files["small.txt"]; f.CopiedTo == "" {
			t.Errorf("small.txt not copied: %+v", f)
		}
	})
}

func TestOutputManyFiles(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, "--profile", data("profiles/many-inodes.toml"), data("hostile.py"), "many", "1000000")
		if !res.FilesTruncated || len(res.Files) != 1000 {
			t.Errorf("%d entries, truncated %v: want the 1000-entry cap", len(res.Files), res.FilesTruncated)
		}
		if ents, _ := os.ReadDir(c.out); len(ents) > 1000 {
			t.Errorf("%d files copied, past the cap", len(ents))
		}
	})
}

func TestOutputDeepTree(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "deep", "3000")
		if len(res.Files) != 1 || res.Files[0].Kind != "dir" || res.Files[0].Skipped == "" {
			t.Errorf("files %+v: want one skipped too-deep directory", res.Files)
		}
	})
}

func TestOutputHostileNames(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "names")
		if len(res.Files) != 8 {
			t.Fatalf("%d entries, want 8: %+v", len(res.Files), res.Files)
		}
		for _, f := range res.Files {
			if f.CopiedTo == "" || !utf8.ValidString(f.Path) || strings.ContainsFunc(f.Path, unicode.IsControl) {
				t.Errorf("%+v", f)
			}
		}
		if f := byPath(res)["new%0Aline.txt"]; f.RawPathB64 == "" {
			t.Errorf("escaped name without its raw bytes: %+v", f)
		}
	})
}

func TestOutputModesStripped(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "modes")
		if len(res.Files) != 5 {
			t.Errorf("%d entries, want 5", len(res.Files))
		}
		// check() asserted 0644 on every copy.
	})
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// usage sums what dir holds: the bytes a consumer reading every file
// reads (a hardlink counts once per name) and the bytes on disk
// (st_blocks*512 of every inode once, directories included).
func usage(dir string) (logical, disk int64) {
	seen := map[uint64]bool{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().IsRegular() {
			logical += fi.Size()
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			disk += st.Blocks * 512
		}
		return nil
	})
	return logical, disk
}

// cappedEntries counts the entries whose copy the output cap stopped.
func cappedEntries(res *nsjail.Result) int {
	n := 0
	for _, f := range res.Files {
		if f.CopiedTo == "" && strings.Contains(f.Skipped, "output cap") {
			n++
		}
	}
	return n
}

// Issue 21, point 3: sparse files are copied dense, and links to them
// count again, so the cap counts the logical bytes put in the output dir.
func TestOutputSparseFilesWithinCap(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "sparse-links")
		max := nsjail.DefaultOutputSpec().MaxBytes
		logical, disk := usage(c.out)
		t.Logf("output dir: %d bytes to read, %d on disk; cap %d", logical, disk, max)
		if logical > max || disk > max {
			t.Errorf("output dir: %d bytes to read, %d on disk, past the %d-byte cap", logical, disk, max)
		}
		copied := 0
		for _, f := range res.Files {
			if f.CopiedTo != "" {
				copied++
			}
		}
		// 12 names of 128 MiB: two fit in 256 MiB, the Result says why
		// the other ten were not copied.
		if len(res.Files) != 12 || copied != 2 || cappedEntries(res) != 10 {
			t.Errorf("%d entries, %d copied, %d stopped by the cap; want 12, 2, 10: %+v", len(res.Files), copied, cappedEntries(res), res.Files)
		}
	})
}

// Issue 11, finding 7: "a\n" and "a%0A" must not share a path.
func TestOutputNamesDoNotCollide(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res := c.run(t, r, data("hostile.py"), "collide")
		if len(res.Files) != 2 {
			t.Fatalf("%d entries, want 2: %+v", len(res.Files), res.Files)
		}
		a, b := res.Files[0], res.Files[1]
		if a.Path == b.Path || a.CopiedTo == "" || b.CopiedTo == "" || a.CopiedTo == b.CopiedTo {
			t.Errorf("two names, one destination: %+v, %+v", a, b)
		}
		raw := map[string]bool{}
		for _, f := range res.Files {
			name, err := base64.StdEncoding.DecodeString(f.RawPathB64)
			if err != nil {
				t.Errorf("%s: raw_path_b64 %q: %v", f.Path, f.RawPathB64, err)
			}
			raw[string(name)] = true
		}
		if !raw["a\n"] || !raw["a%0A"] {
			t.Errorf("raw names %v, want a\\n and a%%0A", raw)
		}
		// check() compared each copy's hash with its entry's.
	})
}

// Issue 11, finding 5: the walk after the payload is bounded by its own
// deadline and hash budget, whatever the workspace holds: 300 sparse
// 128 MiB files took main over a minute to hash under --cpus 0.5.
func TestReportPhaseBounded(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		const timeout, slack = 3 * time.Second, 20 * time.Second
		start := time.Now()
		res, out := r.result(t, "--timeout", "3s", "--cpus", "0.5", data("hostile.py"), "sparse-many", "300")
		took := time.Since(start)
		t.Logf("sbx returned after %v: %s, %d entries, truncated %v (%s)", took.Round(time.Millisecond), res.Status, len(res.Files), res.FilesTruncated, res.FilesTruncatedReason)
		if res.Status != nsjail.StatusOK {
			t.Fatalf("status %s (%s), sbx stderr %q", res.Status, res.Message, out.stderr)
		}
		if took > timeout+slack {
			t.Errorf("sbx returned after %v, past the %v limit plus %v", took, timeout, slack)
		}
		switch res.FilesTruncatedReason {
		case nsjail.TruncatedHashBytes, nsjail.TruncatedWalkTimeout:
		default:
			t.Errorf("files_truncated %v, reason %q: want the report's budget or deadline named", res.FilesTruncated, res.FilesTruncatedReason)
		}
		if !res.FilesTruncated || len(res.Files) >= 300 {
			t.Errorf("%d entries, truncated %v: want a listing cut short", len(res.Files), res.FilesTruncated)
		}
	})
}

// initOf is the child of sbx (pid): its init.
func initOf(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		var child int
		if _, err := fmt.Sscan(string(b), &child); err == nil {
			return child
		}
	}
	return 0
}

// Issue 11, finding 4: an init killed mid-transfer leaves no partial
// file in the output dir, and the Result says the listing was cut.
func TestOutputTransferCut(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		for attempt := 1; attempt <= 3; attempt++ {
			c := newOutputCase(t)
			cmd := r.command("exec", "--json", "--output-dir", c.out, data("hostile.py"), "sparse-many", "2")
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// A name in the output dir: the init streams that file now.
			for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if ents, _ := os.ReadDir(c.out); len(ents) > 0 {
					if pid := initOf(cmd.Process.Pid); pid > 0 {
						syscall.Kill(pid, syscall.SIGKILL)
					}
					break
				}
			}
			cmd.Wait()
			var res nsjail.Result
			if err := json.Unmarshal(so.Bytes(), &res); err != nil {
				t.Fatalf("bad Result (%v)\nstdout %s\nstderr %s", err, so.String(), se.String())
			}
			c.check(t, &res, so.String())
			ents, _ := os.ReadDir(c.out)
			t.Logf("attempt %d: %s, truncated %v (%s), %d entries, output dir %d files, warnings %q", attempt, res.Status, res.FilesTruncated, res.FilesTruncatedReason, len(res.Files), len(ents), res.Warnings)
			if res.FilesTruncatedReason == nsjail.TruncatedTransfer {
				if !res.FilesTruncated || len(res.Files) > 1 || len(ents) > 1 {
					t.Errorf("a cut transfer: truncated %v, %d entries, %d files in the output dir", res.FilesTruncated, len(res.Files), len(ents))
				}
				return
			}
		}
		t.Fatalf("the kill never came mid-transfer in 3 attempts")
	})
}
