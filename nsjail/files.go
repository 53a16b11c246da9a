package nsjail

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OutputSpec says what the init reports of the workspace once the payload
// and all its processes are gone, and the caps that bound it.
type OutputSpec struct {
	// Send streams the contents of created and modified files to the
	// supervisor (an output directory was given); otherwise only their
	// names, sizes and hashes cross.
	Send         bool  `json:"send,omitempty"`
	MaxFiles     int64 `json:"max_files"`
	MaxBytes     int64 `json:"max_bytes"`
	MaxFileBytes int64 `json:"max_file_bytes"`
	MaxDepth     int   `json:"max_depth"`
}

// DefaultOutputSpec caps the workspace report when the profile says
// nothing: enough for a report and its charts, not for a copy of a disk.
func DefaultOutputSpec() OutputSpec {
	return OutputSpec{MaxFiles: 1000, MaxBytes: 256 << 20, MaxFileBytes: 128 << 20, MaxDepth: 32}
}

// Changes of a workspace entry, as the Result reports them.
const (
	ChangeCreated  = "created"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// FileEntry is one element of the Result's `files`: a workspace entry that
// the run created, modified or deleted.
type FileEntry struct {
	// Path is relative to the workspace, valid UTF-8 with no control
	// characters: any other byte is written %XX (and '%' as %25). The
	// real name is then in RawPathB64.
	Path       string `json:"path"`
	RawPathB64 string `json:"raw_path_b64,omitempty"`
	Change     string `json:"change"`
	// Kind is file, symlink, or the kind of a skipped entry (fifo,
	// socket, device, dir).
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Target of a symlink, escaped like Path; links are never followed.
	Target string `json:"target,omitempty"`
	// HardlinkOf names the earlier entry with the same inode: its content
	// crossed once.
	HardlinkOf string `json:"hardlink_of,omitempty"`
	// CopiedTo is where the file was written on the host (--output-dir).
	CopiedTo string `json:"copied_to,omitempty"`
	// Skipped says why the entry was listed but not copied or hashed.
	Skipped string `json:"skipped,omitempty"`
}

// fileRecord is one entry on the files pipe (init -> supervisor), a JSON
// line followed by Size bytes of content when Data is set.
type fileRecord struct {
	Name   []byte `json:"name,omitempty"` // raw bytes, relative to the workspace
	Kind   string `json:"kind"`           // file, symlink, fifo, socket, device, dir, end
	Change string `json:"change,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target []byte `json:"target,omitempty"`
	LinkOf []byte `json:"link_of,omitempty"`
	Reason string `json:"reason,omitempty"`
	Data   bool   `json:"data,omitempty"`
	// Truncated, on the end record: the walk stopped at a cap.
	Truncated bool `json:"truncated,omitempty"`
}

const recordEnd = "end"

// maxRecordLine bounds one header line: names are at most 4096 bytes
// (PATH_MAX), base64 makes them 4/3 larger.
const maxRecordLine = 64 << 10

// safeName renders raw name bytes for JSON and terminals: valid UTF-8
// without control characters stays as it is; anything else is written
// %XX byte by byte, '%' included, and escaped reports that it was.
func safeName(raw []byte) (name string, escaped bool) {
	if utf8.Valid(raw) && !strings.ContainsFunc(string(raw), isUnsafeRune) {
		return string(raw), false
	}
	var b strings.Builder
	for len(raw) > 0 {
		r, n := utf8.DecodeRune(raw)
		if r == utf8.RuneError && n <= 1 || isUnsafeRune(r) || r == '%' {
			for _, c := range raw[:n] {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		} else {
			b.Write(raw[:n])
		}
		raw = raw[n:]
	}
	return b.String(), true
}

func isUnsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == utf8.RuneError || r == '\u2028' || r == '\u2029' ||
		unicode.Is(unicode.Bidi_Control, r)
}

// outputSink receives the contents of files on the host side.
type outputSink interface {
	// create opens the host file for the entry named safe; it returns
	// where it went.
	create(safe string) (io.WriteCloser, string, error)
	// remove undoes a create whose content turned out wrong.
	remove(safe string)
	// link makes safe a hard link to the earlier copy first, so that
	// hardlinked content is written to the host once.
	link(first, safe string) (string, error)
}

// readFiles reads the init's file records until the end record and turns
// them into Result entries, writing contents to sink (nil: discarded). It
// trusts nothing it reads: caps are enforced again here, and every copied
// file is hashed on the host.
func readFiles(r io.Reader, o OutputSpec, sink outputSink) (entries []FileEntry, truncated bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var total int64
	copied := map[string]bool{}
	for n := int64(0); ; n++ {
		line, err := readBoundedLine(br, maxRecordLine)
		if err != nil {
			return entries, true, fmt.Errorf("files pipe: %w", err)
		}
		var rec fileRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return entries, true, fmt.Errorf("files pipe: bad record: %w", err)
		}
		if rec.Kind == recordEnd {
			return entries, rec.Truncated, nil
		}
		if n >= o.MaxFiles {
			return entries, true, fmt.Errorf("files pipe: more than %d entries", o.MaxFiles)
		}
		e := entryOf(&rec)
		if rec.Data {
			if rec.Size < 0 || rec.Size > o.MaxFileBytes || total+rec.Size > o.MaxBytes {
				return entries, true, fmt.Errorf("files pipe: %s: %d bytes is past the caps", e.Path, rec.Size)
			}
			total += rec.Size
			if err := receiveContent(br, &rec, &e, sink); err != nil {
				return entries, true, err
			}
			copied[e.Path] = e.CopiedTo != ""
		} else if e.HardlinkOf != "" && sink != nil && copied[e.HardlinkOf] {
			where, err := sink.link(e.HardlinkOf, e.Path)
			if err != nil {
				e.Skipped = fmt.Sprintf("not linked: %v", err)
			} else {
				e.CopiedTo = where
				copied[e.Path] = true
			}
		}
		entries = append(entries, e)
	}
}

func entryOf(rec *fileRecord) FileEntry {
	name, escaped := safeName(rec.Name)
	e := FileEntry{Path: name, Change: rec.Change, Kind: rec.Kind, Size: rec.Size, SHA256: rec.SHA256, Skipped: rec.Reason}
	if escaped {
		e.RawPathB64 = base64.StdEncoding.EncodeToString(rec.Name)
	}
	if rec.Target != nil {
		e.Target, _ = safeName(rec.Target)
	}
	if rec.LinkOf != nil {
		e.HardlinkOf, _ = safeName(rec.LinkOf)
	}
	return e
}

// receiveContent copies one file's bytes to the sink (or discards them)
// and checks them against the init's hash.
func receiveContent(br *bufio.Reader, rec *fileRecord, e *FileEntry, sink outputSink) error {
	h := sha256.New()
	var w io.Writer = h
	var out io.WriteCloser
	if sink != nil {
		f, where, err := sink.create(e.Path)
		if err != nil {
			e.Skipped = fmt.Sprintf("not copied: %v", err)
		} else {
			out, e.CopiedTo = f, where
			w = io.MultiWriter(h, f)
		}
	}
	_, err := io.CopyN(w, br, rec.Size)
	if out != nil {
		if cerr := out.Close(); err == nil && cerr != nil {
			e.Skipped, e.CopiedTo = fmt.Sprintf("not copied: %v", cerr), ""
			sink.remove(e.Path)
		}
	}
	if err != nil {
		return fmt.Errorf("files pipe: %s: %w", e.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != rec.SHA256 {
		if out != nil {
			sink.remove(e.Path)
		}
		e.CopiedTo, e.Skipped, e.SHA256 = "", "content changed while it was read", got
	}
	return nil
}

// readBoundedLine reads one '\n'-terminated line of at most max bytes.
func readBoundedLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("record longer than %d bytes", max)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}
