package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ent is one crafted tar entry.
type ent struct {
	name, link, body string
	typ              byte
	mode             int64
	size             int64 // declared size when body is empty and size > 0
}

func dir(n string) ent             { return ent{name: n, typ: tar.TypeDir, mode: 0o755} }
func file(n, body string) ent      { return ent{name: n, typ: tar.TypeReg, mode: 0o644, body: body} }
func symlink(n, target string) ent { return ent{name: n, typ: tar.TypeSymlink, link: target} }
func hardlink(n, target string) ent {
	return ent{name: n, typ: tar.TypeLink, link: target}
}

// tarOf writes entries as a tarball. An entry with size > len(body) gets
// only its header (the stream ends there): the extractor must refuse it
// from the header alone.
func tarOf(t testing.TB, ents ...ent) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg && e.size > 0 {
			h.Size = e.size
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.size > 0 {
			tw.Flush()
			return buf.Bytes()
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandboxDirs makes tmp/root (the image root) and tmp/outside (which
// must stay empty), and plants a symlink tmp/root-escape -> outside.
func sandboxDirs(t *testing.T) (root, outside string) {
	tmp := t.TempDir()
	root, outside = filepath.Join(tmp, "root"), filepath.Join(tmp, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { RemoveTree(root) })
	return root, outside
}

func extract(t *testing.T, root string, lim Limits, layers ...[]byte) error {
	x, err := NewExtractor(root, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, l := range layers {
		if err := x.Apply(bytes.NewReader(l)); err != nil {
			return err
		}
	}
	return x.Seal()
}

func TestExtractRules(t *testing.T) {
	small := DefaultLimits
	small.MaxBytes = 1 << 20
	small.MaxEntries = 50
	small.MaxDepth = 8
	small.MaxNameLen = 200
	type check func(t *testing.T, root, outside string)
	exists := func(p string) check {
		return func(t *testing.T, root, _ string) {
			if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
	absent := func(p string) check {
		return func(t *testing.T, root, _ string) {
			if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s should not exist (err %v)", p, err)
			}
		}
	}
	content := func(p, want string) check {
		return func(t *testing.T, root, _ string) {
			b, err := os.ReadFile(filepath.Join(root, p))
			if err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", p, b, err, want)
			}
		}
	}
	modeIs := func(p string, want os.FileMode) check {
		return func(t *testing.T, root, _ string) {
			fi, err := os.Lstat(filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != want {
				t.Errorf("%s mode %v, want %v", p, got, want)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		layers [][]byte
		lim    *Limits
		refuse string // a substring of the error; "" means success
		checks []check
	}{
		{name: "plain tree", layers: [][]byte{tarOf(t, dir("usr/"), file("usr/a", "A"), symlink("bin", "usr"), hardlink("usr/b", "usr/a"))},
			checks: []check{content("usr/a", "A"), content("usr/b", "A"), content("bin/a", "A"), modeIs("usr", 0o555), modeIs("usr/a", 0o444)}},
		{name: "missing parents are made", layers: [][]byte{tarOf(t, file("a/b/c", "x"))}, checks: []check{content("a/b/c", "x")}},
		{name: "dotdot refused", layers: [][]byte{tarOf(t, file("../evil", "x"))}, refuse: `".." in name`},
		{name: "dotdot in the middle refused", layers: [][]byte{tarOf(t, dir("a/"), file("a/../../evil", "x"))}, refuse: `".." in name`},
		{name: "absolute name stays inside", layers: [][]byte{tarOf(t, file("/abs", "x"))}, checks: []check{content("abs", "x")}},
		{name: "write through absolute symlink stays inside",
			layers: [][]byte{tarOf(t, dir("outside/"), symlink("etc", "/../../outside"), file("etc/passwd", "pwned"))},
			checks: []check{content("outside/passwd", "pwned")}},
		{name: "write through a dangling absolute symlink refused",
			layers: [][]byte{tarOf(t, symlink("etc", "/../../outside"), file("etc/passwd", "pwned"))}, refuse: "make its directory"},
		{name: "write through relative symlink stays inside",
			layers: [][]byte{tarOf(t, dir("a/"), symlink("a/up", "../../../.."), file("a/up/x", "x"))},
			checks: []check{content("x", "x")}},
		{name: "symlink replaced, never followed", layers: [][]byte{tarOf(t, symlink("f", "/../outside/target"), file("f", "new"))},
			checks: []check{content("f", "new")}},
		{name: "hardlink to outside refused", layers: [][]byte{tarOf(t, hardlink("h", "../outside/x"))}, refuse: "hardlink"},
		{name: "hardlink through symlink to outside stays inside",
			layers: [][]byte{tarOf(t, symlink("s", "/"), hardlink("h", "s/etc/shadow"))}, refuse: `hardlink target "s/etc/shadow"`},
		{name: "hardlink to a later entry refused", layers: [][]byte{tarOf(t, hardlink("h", "later"), file("later", "x"))}, refuse: "no earlier entry"},
		{name: "hardlink to a directory refused", layers: [][]byte{tarOf(t, dir("d/"), hardlink("h", "d"))}, refuse: "not a regular file"},
		{name: "hardlink to a symlink refused", layers: [][]byte{tarOf(t, symlink("s", "/etc/passwd"), hardlink("h", "s"))}, refuse: "not a regular file"},
		{name: "whiteout removes a lower file",
			layers: [][]byte{tarOf(t, file("a/x", "1"), file("a/y", "2")), tarOf(t, file("a/.wh.x", ""))},
			checks: []check{absent("a/x"), content("a/y", "2"), absent("a/.wh.x")}},
		{name: "whiteout removes a lower directory",
			layers: [][]byte{tarOf(t, file("a/b/c", "1")), tarOf(t, file("a/.wh.b", ""))}, checks: []check{absent("a/b"), exists("a")}},
		{name: "whiteout of dotdot refused", layers: [][]byte{tarOf(t, file("a/.wh...", ""))}, refuse: "not a name"},
		{name: "whiteout through a symlink stays inside",
			layers: [][]byte{tarOf(t, dir("outside/"), symlink("l", "/../outside"), file("l/keep", "k")), tarOf(t, file("l/.wh.keep", ""))},
			checks: []check{absent("outside/keep")}},
		{name: "whiteout spares its own layer",
			layers: [][]byte{tarOf(t, file("x", "new"), file(".wh.x", ""))}, checks: []check{content("x", "new")}},
		{name: "opaque directory",
			layers: [][]byte{tarOf(t, file("d/old", "1")), tarOf(t, file("d/new", "2"), file("d/.wh..wh..opq", ""), file("d/later", "3"), file("d/.wh..wh..opq", ""))},
			checks: []check{absent("d/old"), content("d/new", "2"), content("d/later", "3")}},
		{name: "devices and fifos skipped",
			layers: [][]byte{tarOf(t, ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, ent{name: "sda", typ: tar.TypeBlock, mode: 0o666}, ent{name: "fifo", typ: tar.TypeFifo, mode: 0o666})},
			checks: []check{absent("dev/null"), absent("sda"), absent("fifo")}},
		{name: "setuid and setgid stripped",
			layers: [][]byte{tarOf(t, ent{name: "su", typ: tar.TypeReg, mode: 0o4755, body: "x"}, ent{name: "sg", typ: tar.TypeReg, mode: 0o2755, body: "x"}, ent{name: "d", typ: tar.TypeDir, mode: 0o3777})},
			checks: []check{modeIs("su", 0o555), modeIs("sg", 0o555), modeIs("d", 0o555|os.ModeSticky)}},
		{name: "dir replaces file and file replaces dir",
			layers: [][]byte{tarOf(t, file("a", "f"), dir("b/"), file("b/c", "c")), tarOf(t, dir("a/"), file("b", "now a file"))},
			checks: []check{content("b", "now a file"), exists("a")}},
		{name: "a later layer overwrites a read-only file",
			layers: [][]byte{tarOf(t, file("f", "1")), tarOf(t, file("f", "2"))}, checks: []check{content("f", "2")}},
		{name: "big entry refused from its header", layers: [][]byte{tarOf(t, ent{name: "sparse", typ: tar.TypeReg, size: 100 << 20})},
			refuse: "takes the image past", checks: []check{absent("sparse")}},
		{name: "huge entry refused at the default caps", lim: &DefaultLimits, layers: [][]byte{tarOf(t, ent{name: "sparse", typ: tar.TypeReg, size: 10 << 30})},
			refuse: "more than 4294967296 for one entry", checks: []check{absent("sparse")}},
		{name: "total size over layers", lim: &Limits{MaxBytes: 10, MaxEntries: 50, MaxNameLen: 100, MaxDepth: 8, MaxNameBytes: 1 << 20},
			layers: [][]byte{tarOf(t, file("a", "123456")), tarOf(t, file("b", "123456"))}, refuse: "takes the image past"},
		{name: "entry count", layers: [][]byte{tarOf(t, manyEntries(51)...)}, refuse: "more than 50 entries"},
		{name: "name length", layers: [][]byte{tarOf(t, file(strings.Repeat("n", 201), ""))}, refuse: "more than 200"},
		{name: "component length", lim: &Limits{MaxBytes: 10, MaxEntries: 50, MaxNameLen: 4096, MaxDepth: 8, MaxNameBytes: 1 << 20},
			layers: [][]byte{tarOf(t, file(strings.Repeat("n", 256), ""))}, refuse: "NAME_MAX"},
		{name: "depth", layers: [][]byte{tarOf(t, file(strings.Repeat("d/", 9)+"f", ""))}, refuse: "deep"},
		{name: "symlink loop refuses writes through it",
			layers: [][]byte{tarOf(t, symlink("a", "b"), symlink("b", "a"), file("a/x", "x"))}, refuse: "make its directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := sandboxDirs(t)
			lim := small
			if tc.lim != nil {
				lim = *tc.lim
			}
			err := extract(t, root, lim, tc.layers...)
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
				t.Fatalf("err = %v, want one saying %q", err, tc.refuse)
			}
			for _, c := range tc.checks {
				c(t, root, outside)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("written outside the root: %v", ents)
			}
			if ents, _ := os.ReadDir(filepath.Dir(root)); len(ents) != 2 {
				t.Errorf("the root's parent holds %d entries, want root and outside", len(ents))
			}
		})
	}
}

// TestExtractHeadersAreCapped: entries with no data but 256 KiB of PAX
// records each are refused once the stream passes data cap plus a
// header allowance per entry, before the entry cap.
func TestExtractHeadersAreCapped(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < 40; i++ {
		tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"comment": strings.Repeat("c", 256<<10)}})
	}
	tw.Close()
	root, _ := sandboxDirs(t)
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 100, MaxNameLen: 100, MaxDepth: 8, MaxNameBytes: 1 << 20}
	err := extract(t, root, lim, buf.Bytes())
	if !errors.Is(err, ErrStreamCap) {
		t.Fatalf("err = %v, want ErrStreamCap", err)
	}
}

func manyEntries(n int) []ent {
	var e []ent
	for i := 0; i < n; i++ {
		e = append(e, dir("d/"))
	}
	return e
}

// TestExtractMillionEntries streams a layer of 1,000,000 headers: it is
// refused at the default cap, with sbx's memory flat (the stream is never
// held) and without a million files on disk.
func TestExtractMillionEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: streams 500 MB of tar headers")
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := 0; i < 1_000_000; i++ {
			if err := tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	root, _ := sandboxDirs(t)
	x, err := NewExtractor(root, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	err = x.Apply(pr)
	pr.CloseWithError(errors.New("done"))
	if err == nil || !strings.Contains(err.Error(), "more than 500000 entries") {
		t.Fatalf("err = %v, want the entry cap", err)
	}
}

// specTar turns a fuzz input that starts with "S:" into a tarball, one
// entry a line: a type letter (d dir, f file, l symlink, h hardlink, c
// char device, p FIFO), the name, and for l and h a tab and the target.
// The fuzzer then explores names and links rather than tar checksums.
func specTar(t testing.TB, spec string) []byte {
	var ents []ent
	for _, line := range strings.Split(spec, "\n") {
		if line == "" {
			continue
		}
		name, link, _ := strings.Cut(line[1:], "\t")
		switch line[0] {
		case 'd':
			ents = append(ents, dir(name))
		case 'f':
			ents = append(ents, ent{name: name, typ: tar.TypeReg, mode: 0o6755, body: "x"})
		case 'l':
			ents = append(ents, symlink(name, link))
		case 'h':
			ents = append(ents, hardlink(name, link))
		case 'c':
			ents = append(ents, ent{name: name, typ: tar.TypeChar, mode: 0o666})
		case 'p':
			ents = append(ents, ent{name: name, typ: tar.TypeFifo, mode: 0o666})
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if tw.WriteHeader(h) != nil {
			return buf.Bytes()
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	return buf.Bytes()
}

// FuzzExtract feeds arbitrary bytes, crafted tarballs and entry lists
// (specTar) to the extractor: it must never panic, never write outside
// its root, and leave no device, FIFO or setuid file, whatever it
// accepts. In CI for 20 s; longer by hand:
//
//	go test -run '^$' -fuzz '^FuzzExtract$' -fuzztime 60s ./image/
func FuzzExtract(f *testing.F) {
	for _, seed := range [][]byte{
		tarOf(f, dir("a/"), file("a/b", "x"), symlink("l", "/.."), file("l/x", "y"), hardlink("h", "a/b")),
		tarOf(f, file("../x", "")),
		tarOf(f, symlink("s", "/../outside"), file("s/.wh.k", ""), file("s/.wh..wh..opq", "")),
		tarOf(f, ent{name: "c", typ: tar.TypeChar}),
		[]byte("not a tarball"),
		[]byte("S:doutside/\nletc\t/../outside\nfetc/passwd\nla/up\t../../..\nfa/up/x\nhh\tetc/passwd\nfd/.wh..wh..opq\nfd/.wh.x\ncdev\npfifo"),
		[]byte("S:ls\t/\nhh\ts/etc/shadow\nf../x\nl/abs\t/proc/self/root\nfabs/y"),
	} {
		f.Add(seed)
	}
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 200, MaxNameLen: 512, MaxDepth: 16, MaxNameBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, layer []byte) {
		tmp := t.TempDir()
		root, outside := filepath.Join(tmp, "root"), filepath.Join(tmp, "outside")
		os.Mkdir(root, 0o755)
		os.Mkdir(outside, 0o755)
		x, err := NewExtractor(root, lim)
		if err != nil {
			t.Fatal(err)
		}
		if spec, ok := bytes.CutPrefix(layer, []byte("S:")); ok {
			layer = specTar(t, string(spec))
		}
		x.Apply(bytes.NewReader(layer))
		x.Seal()
		x.Close()
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			if m := fi.Mode(); m&(os.ModeDevice|os.ModeNamedPipe|os.ModeSocket|os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Fatalf("%s has mode %v", p, m)
			}
			return nil
		})
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("written outside the root: %v", ents)
		}
		if ents, _ := os.ReadDir(tmp); len(ents) != 2 {
			t.Fatalf("the root's parent holds %d entries", len(ents))
		}
		if err := RemoveTree(root); err != nil {
			t.Fatalf("RemoveTree: %v", err)
		}
	})
}
