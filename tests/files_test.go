//go:build integration

package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	filepath.Walk(c.out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == c.out {
			return nil
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
