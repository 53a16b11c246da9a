package nsjail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestSafeName(t *testing.T) {
	cases := []struct {
		raw, want string
		escaped   bool
	}{
		{"report.png", "report.png", false},
		{"dir/ünïcødé.csv", "dir/ünïcødé.csv", false},
		{"100%.txt", "100%.txt", false},
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
func (m *memSink) remove(name string) { delete(m.files, name) }
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
	entries, truncated, err := readFiles(r, o, sink)
	if err != nil || truncated || len(entries) != 4 {
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
	}
	for name, r := range cases {
		if _, truncated, err := readFiles(r, o, nil); err == nil || !truncated {
			t.Errorf("%s: err %v truncated %v, want an error", name, err, truncated)
		}
	}
}
