package nsjail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// collectDir runs the collector on dir and reads its stream back as the
// supervisor would, with no output dir.
func collectDir(t *testing.T, dir string, o OutputSpec) ([]FileEntry, Truncation) {
	t.Helper()
	var b bytes.Buffer
	if err := newCollector(&b, o, nil).collect(dir); err != nil {
		t.Fatalf("collect: %v", err)
	}
	entries, _, cut, err := readFiles(&b, o, nil)
	if err != nil {
		t.Fatalf("readFiles: %v", err)
	}
	return entries, cut
}

// writeSparse makes a file of size bytes that holds data at off and
// holes elsewhere, and returns the sha256 of its logical content.
func writeSparse(t *testing.T, path string, size, off int64, data string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
	logical := make([]byte, size)
	copy(logical[off:], data)
	h := sha256.Sum256(logical)
	return hex.EncodeToString(h[:])
}

func TestCollectorHashesLogicalContent(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{
		"hole-data-hole": writeSparse(t, filepath.Join(dir, "hole-data-hole"), 8<<20, 3<<20+17, "in the middle"),
		"data-hole":      writeSparse(t, filepath.Join(dir, "data-hole"), 4<<20, 0, "at the start"),
		"hole-data":      writeSparse(t, filepath.Join(dir, "hole-data"), 1<<20+5, 1<<20, "end!!"),
		"all-hole":       writeSparse(t, filepath.Join(dir, "all-hole"), 3<<20, 0, ""),
		"empty":          writeSparse(t, filepath.Join(dir, "empty"), 0, 0, ""),
	}
	entries, cut := collectDir(t, dir, DefaultOutputSpec())
	if cut != NotTruncated || len(entries) != len(want) {
		t.Fatalf("cut %q, %d entries: %+v", cut, len(entries), entries)
	}
	for _, e := range entries {
		if e.SHA256 != want[e.Path] {
			t.Errorf("%s: sha256 %s, want %s (of the logical content)", e.Path, e.SHA256, want[e.Path])
		}
	}
}

func TestCollectorStopsAtHashBudget(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		writeSparse(t, filepath.Join(dir, name), 1<<20, 0, name)
	}
	o := DefaultOutputSpec()
	o.MaxHashBytes = 2<<20 + 1
	entries, cut := collectDir(t, dir, o)
	if cut != TruncatedHashBytes || len(entries) != 3 {
		t.Fatalf("cut %q, %d entries, want max_hash_bytes after 3: %+v", cut, len(entries), entries)
	}
	if last := entries[2]; last.SHA256 != "" || !strings.Contains(last.Skipped, "not hashed") {
		t.Errorf("the entry past the budget: %+v", last)
	}
}

func TestCollectorStopsAtDeadline(t *testing.T) {
	dir := t.TempDir()
	writeSparse(t, filepath.Join(dir, "a"), 1<<20, 0, "a")
	o := DefaultOutputSpec()
	o.WalkTimeout = time.Nanosecond
	entries, cut := collectDir(t, dir, o)
	if cut != TruncatedWalkTimeout || len(entries) != 0 {
		t.Fatalf("cut %q, entries %+v: want walk_timeout before the first entry", cut, entries)
	}
}

func TestCollectorCapCountsLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("1234"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"l1", "l2", "l3"} {
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	o := DefaultOutputSpec()
	o.Send, o.MaxBytes = true, 10
	var b bytes.Buffer
	if err := newCollector(&b, o, nil).collect(dir); err != nil {
		t.Fatal(err)
	}
	sink := &memSink{files: map[string]*bytes.Buffer{}, links: map[string]string{}}
	entries, _, _, err := readFiles(&b, o, sink)
	if err != nil || len(entries) != 4 {
		t.Fatalf("readFiles: %v, %+v", err, entries)
	}
	// Two names of 4 bytes fit in 10; the other two are listed, not copied.
	var copied, skipped int
	for _, e := range entries {
		switch {
		case e.CopiedTo != "":
			copied++
		case strings.Contains(e.Skipped, "output cap"):
			skipped++
		}
	}
	if copied != 2 || skipped != 2 || len(sink.files) != 1 || len(sink.links) != 1 {
		t.Errorf("%d copied, %d skipped, sink %v %v: %+v", copied, skipped, sink.files, sink.links, entries)
	}
}

func TestReadFilesRemovesPartialCopy(t *testing.T) {
	dir := t.TempDir()
	od, err := openOutputDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	o := OutputSpec{MaxFiles: 10, MaxBytes: 100, MaxFileBytes: 50, MaxDepth: 8}
	r := stream(t,
		fileRecord{Name: []byte("whole"), Kind: "file", Size: 5, SHA256: sum("whole"), Data: true}, "whole",
		fileRecord{Name: []byte("sub/cut"), Kind: "file", Size: 10, SHA256: sum("0123456789"), Data: true}, "01234",
	)
	entries, truncated, cut, err := readFiles(r, o, od)
	if err == nil || !truncated || cut != TruncatedTransfer {
		t.Fatalf("err %v, truncated %v, cut %q: want transfer_failed", err, truncated, cut)
	}
	if len(entries) != 1 || entries[0].Path != "whole" {
		t.Errorf("entries %+v, want only the whole file", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub/cut")); !os.IsNotExist(err) {
		t.Errorf("the partial copy stays: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "whole")); string(b) != "whole" {
		t.Errorf("whole holds %q", b)
	}
}

func TestCollectorInputs(t *testing.T) {
	dir := t.TempDir()
	same := writeSparse(t, filepath.Join(dir, "same"), 3<<20, 0, "input")
	writeSparse(t, filepath.Join(dir, "changed"), 3<<20, 0, "other")
	inputs := map[string]string{"same": same, "changed": same, "gone": same}
	o := DefaultOutputSpec()
	o.MaxFileBytes = 1 << 20 // the inputs are larger: they are hashed all the same
	run := func(o OutputSpec) ([]FileEntry, Truncation) {
		var b bytes.Buffer
		if err := newCollector(&b, o, inputs).collect(dir); err != nil {
			t.Fatal(err)
		}
		entries, _, cut, err := readFiles(&b, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		return entries, cut
	}
	entries, cut := run(o)
	got := map[string]string{}
	for _, e := range entries {
		got[e.Path] = e.Change
	}
	if cut != NotTruncated || len(got) != 2 || got["changed"] != ChangeModified || got["gone"] != ChangeDeleted {
		t.Errorf("cut %q, entries %+v: want changed modified, gone deleted, same not listed", cut, entries)
	}
	// Past the hash budget an input's change is unknown: not listed, and
	// no input is reported deleted.
	o.MaxHashBytes = 1 << 20
	entries, cut = run(o)
	if cut != TruncatedHashBytes || len(entries) != 0 {
		t.Errorf("cut %q, entries %+v: want max_hash_bytes and nothing listed", cut, entries)
	}
}
