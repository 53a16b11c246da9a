package nsjail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSafeName(t *testing.T) {
	cases := []struct {
		raw, want string
		escaped   bool
	}{
		{"report.png", "report.png", false},
		{"dir/ünïcødé.csv", "dir/ünïcødé.csv", false},
		{"100%.txt", "100%25.txt", true},
		{"a%0A", "a%250A", true},
		{"a\n", "a%0A", true},
		{"bad\nname", "bad%0Aname", true},
		{"esc\x1b[31m", "esc%1B[31m", true},
		{"inv\xff.txt", "inv%FF.txt", true},
		{"50%\x00", "50%25%00", true},
		{"rtl\u202eexe.txt", "rtl%E2%80%AEexe.txt", true},
		{"quote\"back\\slash", "quote\"back\\slash", false},
	}
	for _, tc := range cases {
		got, esc := safeName([]byte(tc.raw))
		if got != tc.want || esc != tc.escaped {
			t.Errorf("safeName(%q) = %q, %v; want %q, %v", tc.raw, got, esc, tc.want, tc.escaped)
		}
		if b, err := json.Marshal(got); err != nil || !json.Valid(b) {
			t.Errorf("safeName(%q) does not survive JSON: %v", tc.raw, err)
		}
	}
}

// memSink keeps what it receives.
type memSink struct {
	files map[string]*bytes.Buffer
	links map[string]string
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (m *memSink) create(name string) (io.WriteCloser, string, error) {
	b := &bytes.Buffer{}
	m.files[name] = b
	return nopCloser{b}, "/out/" + name, nil
}
func (m *memSink) remove(name string) error { delete(m.files, name); return nil }
func (m *memSink) link(first, name string) (string, error) {
	m.links[name] = first
	return "/out/" + name, nil
}

func stream(t *testing.T, recs ...any) io.Reader {
	var b bytes.Buffer
	for _, r := range recs {
		switch v := r.(type) {
		case fileRecord:
			line, _ := encodeLine(v)
			b.Write(line)
		case string:
			b.WriteString(v)
		}
	}
	return &b
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestReadFiles(t *testing.T) {
	o := OutputSpec{MaxFiles: 10, MaxBytes: 100, MaxFileBytes: 50, MaxDepth: 8}
	sink := &memSink{files: map[string]*bytes.Buffer{}, links: map[string]string{}}
	r := stream(t,
		fileRecord{Name: []byte("a.txt"), Kind: "file", Change: ChangeCreated, Size: 5, SHA256: sum("hello"), Data: true}, "hello",
		fileRecord{Name: []byte("b.txt"), Kind: "file", Change: ChangeCreated, Size: 5, SHA256: sum("hello"), LinkOf: []byte("a.txt")},
		fileRecord{Name: []byte("lie.txt"), Kind: "file", Change: ChangeModified, Size: 3, SHA256: sum("abc"), Data: true}, "xyz",
		fileRecord{Name: []byte("l"), Kind: "symlink", Change: ChangeCreated, Target: []byte("/etc/shadow")},
		fileRecord{Kind: recordEnd},
	)
	entries, truncated, cut, err := readFiles(r, o, sink)
	if err != nil || truncated || cut != NotTruncated || len(entries) != 4 {
		t.Fatalf("readFiles: %v, truncated %v, %d entries", err, truncated, len(entries))
	}
	if sink.files["a.txt"].String() != "hello" || entries[0].CopiedTo != "/out/a.txt" {
		t.Errorf("a.txt: %+v", entries[0])
	}
	if sink.links["b.txt"] != "a.txt" || entries[1].HardlinkOf != "a.txt" {
		t.Errorf("hardlink not linked: %+v %v", entries[1], sink.links)
	}
	if _, kept := sink.files["lie.txt"]; kept || entries[2].CopiedTo != "" || entries[2].Skipped == "" || entries[2].SHA256 != sum("xyz") {
		t.Errorf("content that does not match its hash was kept: %+v", entries[2])
	}
	if entries[3].Target != "/etc/shadow" || entries[3].CopiedTo != "" {
		t.Errorf("symlink: %+v", entries[3])
	}
}

func TestReadFilesEnforcesCaps(t *testing.T) {
	o := OutputSpec{MaxFiles: 2, MaxBytes: 8, MaxFileBytes: 6, MaxDepth: 8}
	cases := map[string]io.Reader{
		"file over the per-file cap": stream(t, fileRecord{Name: []byte("big"), Kind: "file", Size: 7, Data: true}, "1234567", fileRecord{Kind: recordEnd}),
		"total over the cap": stream(t,
			fileRecord{Name: []byte("a"), Kind: "file", Size: 5, SHA256: sum("12345"), Data: true}, "12345",
			fileRecord{Name: []byte("b"), Kind: "file", Size: 5, Data: true}, "12345", fileRecord{Kind: recordEnd}),
		"too many entries": stream(t, fileRecord{Name: []byte("a"), Kind: "fifo"}, fileRecord{Name: []byte("b"), Kind: "fifo"}, fileRecord{Name: []byte("c"), Kind: "fifo"}, fileRecord{Kind: recordEnd}),
		"endless line":     strings.NewReader(strings.Repeat("x", maxRecordLine+10)),
		"cut short":        stream(t, fileRecord{Name: []byte("a"), Kind: "file", Size: 5, Data: true}, "12"),
		"garbage":          strings.NewReader("{not json}\n"),
		"unknown cut":      stream(t, fileRecord{Kind: recordEnd, Truncated: true, Cut: "because"}),
	}
	for name, r := range cases {
		if _, truncated, cut, err := readFiles(r, o, nil); err == nil || !truncated || cut != TruncatedTransfer {
			t.Errorf("%s: err %v truncated %v (%q), want an error", name, err, truncated, cut)
		}
	}
}

func TestReadFilesCapsCountLinks(t *testing.T) {
	o := OutputSpec{MaxFiles: 10, MaxBytes: 12, MaxFileBytes: 12, MaxDepth: 8}
	sink := &memSink{files: map[string]*bytes.Buffer{}, links: map[string]string{}}
	link := func(name string) fileRecord {
		return fileRecord{Name: []byte(name), Kind: "file", Size: 5, SHA256: sum("hello"), LinkOf: []byte("a")}
	}
	r := stream(t,
		fileRecord{Name: []byte("a"), Kind: "file", Size: 5, SHA256: sum("hello"), Data: true}, "hello",
		link("b"), link("c"),
		fileRecord{Name: []byte("short"), Kind: "file", Size: 1, SHA256: sum("hello"), LinkOf: []byte("a")},
		fileRecord{Kind: recordEnd},
	)
	entries, _, _, err := readFiles(r, o, sink)
	if err != nil || len(entries) != 4 {
		t.Fatalf("readFiles: %v, %d entries", err, len(entries))
	}
	if entries[1].CopiedTo == "" || sink.links["b"] != "a" {
		t.Errorf("b, within the cap, not linked: %+v", entries[1])
	}
	// a and b make 10 logical bytes: c would make 15, past 12.
	if _, linked := sink.links["c"]; linked || entries[2].CopiedTo != "" || !strings.Contains(entries[2].Skipped, "output cap") {
		t.Errorf("c linked past the cap: %+v", entries[2])
	}
	if _, linked := sink.links["short"]; linked || entries[3].Skipped == "" {
		t.Errorf("a link whose size lies was linked: %+v", entries[3])
	}
}

func TestReadFilesOneEntryPerName(t *testing.T) {
	o := OutputSpec{MaxFiles: 10, MaxBytes: 100, MaxFileBytes: 50, MaxDepth: 8}
	sink := &memSink{files: map[string]*bytes.Buffer{}, links: map[string]string{}}
	r := stream(t,
		fileRecord{Name: []byte("x"), Kind: "file", Size: 3, SHA256: sum("one"), Data: true}, "one",
		fileRecord{Name: []byte("x"), Kind: "file", Size: 3, SHA256: sum("two"), Data: true}, "two",
		fileRecord{Name: []byte("x"), Kind: "file", Size: 3, SHA256: sum("one"), LinkOf: []byte("x")},
		fileRecord{Kind: recordEnd},
	)
	entries, _, _, err := readFiles(r, o, sink)
	if err != nil || len(entries) != 3 {
		t.Fatalf("readFiles: %v, %d entries", err, len(entries))
	}
	if got := sink.files["x"].String(); got != "one" || entries[0].SHA256 != sum(got) || entries[0].CopiedTo == "" {
		t.Errorf("x holds %q, the Result says %+v", got, entries[0])
	}
	for _, e := range entries[1:] {
		if e.CopiedTo != "" || e.Skipped == "" {
			t.Errorf("a second entry was written to x: %+v", e)
		}
	}
	if len(sink.links) != 0 {
		t.Errorf("links %v", sink.links)
	}
}

func TestReadFilesEndRecordCut(t *testing.T) {
	o := DefaultOutputSpec()
	for _, want := range []Truncation{TruncatedFiles, TruncatedHashBytes, TruncatedWalkTimeout} {
		_, truncated, cut, err := readFiles(stream(t, fileRecord{Kind: recordEnd, Truncated: true, Cut: string(want)}), o, nil)
		if err != nil || !truncated || cut != want {
			t.Errorf("%s: truncated %v, cut %q, err %v", want, truncated, cut, err)
		}
	}
}

// failingSink's files take limit bytes, then fail like a full disk.
type failingSink struct {
	memSink
	limit int
}

type limitedWriter struct {
	b     *bytes.Buffer
	limit int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.limit {
		return 0, errors.New("no space left on device")
	}
	return w.b.Write(p)
}

func (w *limitedWriter) Close() error { return nil }

func (f *failingSink) create(name string) (io.WriteCloser, string, error) {
	b := &bytes.Buffer{}
	f.files[name] = b
	return &limitedWriter{b, f.limit}, "/out/" + name, nil
}

func TestReadFilesWriteErrorRemovesCopy(t *testing.T) {
	o := OutputSpec{MaxFiles: 10, MaxBytes: 100, MaxFileBytes: 50, MaxDepth: 8}
	sink := &failingSink{memSink{files: map[string]*bytes.Buffer{}, links: map[string]string{}}, 4}
	r := stream(t,
		fileRecord{Name: []byte("big"), Kind: "file", Size: 6, SHA256: sum("123456"), Data: true}, "123456",
		fileRecord{Name: []byte("ok"), Kind: "file", Size: 2, SHA256: sum("ok"), Data: true}, "ok",
		fileRecord{Kind: recordEnd},
	)
	entries, truncated, _, err := readFiles(r, o, sink)
	if err != nil || truncated || len(entries) != 2 {
		t.Fatalf("readFiles: %v, truncated %v, %d entries", err, truncated, len(entries))
	}
	if _, kept := sink.files["big"]; kept || entries[0].CopiedTo != "" || !strings.Contains(entries[0].Skipped, "no space") || entries[0].SHA256 != sum("123456") {
		t.Errorf("a copy that failed to write: %+v, kept %v", entries[0], kept)
	}
	if sink.files["ok"].String() != "ok" || entries[1].CopiedTo == "" {
		t.Errorf("the next file after a write error: %+v", entries[1])
	}
}

// unescapeName inverts safeName: %XX is byte XX, anything else itself.
func unescapeName(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return nil, fmt.Errorf("%q: %% at %d without two hex digits", s, i)
		}
		b, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
			return nil, fmt.Errorf("%q: bad escape at %d", s, i)
		}
		out = append(out, b[0])
		i += 2
	}
	return out, nil
}

// FuzzEscapeName: safeName is a safe, injective encoding. Its output is
// valid UTF-8 without unsafe runes, unescaping gives back the raw bytes,
// and two different names never share an escaped form (issue 11, finding
// 7: they would share a path in --output-dir).
func FuzzEscapeName(f *testing.F) {
	for _, s := range [][2]string{{"a\n", "a%0A"}, {"100%.txt", "100%25.txt"}, {"inv\xff", "inv%FF"}, {"ok", "ok"}, {"\u202e", "%E2%80%AE"}, {"é", "\xc3\xa9"}} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ea, escA := safeName(a)
		if !utf8.ValidString(ea) || strings.ContainsFunc(ea, isUnsafeRune) {
			t.Fatalf("safeName(%q) = %q: not safe", a, ea)
		}
		if escA != (ea != string(a)) {
			t.Fatalf("safeName(%q) = %q, escaped %v", a, ea, escA)
		}
		back, err := unescapeName(ea)
		if err != nil || !bytes.Equal(back, a) {
			t.Fatalf("safeName(%q) = %q, which unescapes to %q (%v)", a, ea, back, err)
		}
		if eb, _ := safeName(b); !bytes.Equal(a, b) && ea == eb {
			t.Fatalf("safeName(%q) = safeName(%q) = %q", a, b, ea)
		}
	})
}

func TestOutputSpecWithInputs(t *testing.T) {
	cases := []struct {
		name     string
		inputs   int64
		hash     int64
		deadline time.Duration
	}{
		{"no inputs", 0, 1 << 30, 2 * time.Second},
		{"a script", 2 << 10, 1<<30 + 2<<10, 2*time.Second + 15258*time.Nanosecond},
		{"1 GiB of data", 1 << 30, 2 << 30, 10 * time.Second},
		{"a 100 GiB workspace", 100 << 30, 101 << 30, 802 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := withInputs(DefaultOutputSpec(), tc.inputs)
			if o.MaxHashBytes != tc.hash || o.WalkTimeout != tc.deadline {
				t.Errorf("withInputs(%d): hash %d, deadline %v; want %d, %v", tc.inputs, o.MaxHashBytes, o.WalkTimeout, tc.hash, tc.deadline)
			}
		})
	}
}
