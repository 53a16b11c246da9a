package nsjail

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// inputHashRate is a pessimistic sha256 rate for the walk's deadline: a
// tenth of one core with SHA extensions, for --cpus quotas and a loaded
// host.
const inputHashRate = 128 << 20 // bytes per second

// withInputs sizes the walk's bounds for the inputs streamed in, n bytes
// in all: the walk hashes them again to tell modified inputs from
// unchanged ones, so its hash budget and its deadline grow with them. The
// operator chose these bytes, the payload cannot add to them; and as the
// init applies this from what it wrote itself, a Spec sent before the
// payload is known (a warm pool) stays right.
func withInputs(o OutputSpec, n int64) OutputSpec {
	o.MaxHashBytes += n
	o.WalkTimeout += time.Duration(float64(n) / inputHashRate * float64(time.Second))
	return o
}

// truncationOf checks a reason sent by the init.
func truncationOf(s string) (Truncation, error) {
	switch t := Truncation(s); t {
	case TruncatedFiles, TruncatedHashBytes, TruncatedWalkTimeout:
		return t, nil
	}
	return "", fmt.Errorf("unknown truncation reason %q", s)
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
	// Truncated, on the end record: the walk stopped at a cap, named by
	// Cut.
	Truncated bool   `json:"truncated,omitempty"`
	Cut       string `json:"cut,omitempty"`
}

const recordEnd = "end"

// maxRecordLine bounds one header line: names are at most 4096 bytes
// (PATH_MAX), base64 makes them 4/3 larger.
const maxRecordLine = 64 << 10

// safeName renders raw name bytes for JSON and terminals: valid UTF-8
// without control characters or '%' stays as it is; anything else is
// written %XX byte by byte, and escaped reports that it was. '%' is always
// escaped, so that the mapping is injective: were it kept in otherwise
// safe names, a file named "a%0A" and one named "a\n" would both be
// "a%0A" (issue 11, finding 7). FuzzEscapeName checks the round trip.
func safeName(raw []byte) (name string, escaped bool) {
	if utf8.Valid(raw) && !strings.ContainsFunc(string(raw), isUnsafeRune) && !bytes.ContainsRune(raw, '%') {
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
	// remove undoes a create whose content turned out wrong or cut.
	remove(safe string) error
	// link makes safe a hard link to the earlier copy first, so that
	// hardlinked content is written to the host once.
	link(first, safe string) (string, error)
}

// readFiles reads the init's file records until the end record and turns
// them into Result entries, writing contents to sink (nil: discarded). It
// trusts nothing it reads: caps are enforced again here, every copied
// file is hashed on the host, and no two entries are written to one name.
//
// The caps count logical bytes, what a consumer reading every file of the
// output dir gets: a file's size (holes included: copies are written
// dense), and again for each hardlink to it, although a link takes no
// room on the host (issue 11, finding 6; issue 21).
func readFiles(r io.Reader, o OutputSpec, sink outputSink) (entries []FileEntry, truncated bool, cut Truncation, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var total int64
	copied := map[string]int64{} // name -> size of its copy in the output dir
	taken := map[string]bool{}   // names written to the output dir, or tried
	broken := func(err error) ([]FileEntry, bool, Truncation, error) {
		return entries, true, TruncatedTransfer, fmt.Errorf("files pipe: %w", err)
	}
	for n := int64(0); ; n++ {
		line, err := readBoundedLine(br, maxRecordLine)
		if err != nil {
			return broken(err)
		}
		var rec fileRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return broken(fmt.Errorf("bad record: %w", err))
		}
		if rec.Kind == recordEnd {
			if !rec.Truncated {
				return entries, false, NotTruncated, nil
			}
			cut, err := truncationOf(rec.Cut)
			if err != nil {
				return broken(err)
			}
			return entries, true, cut, nil
		}
		if n >= o.MaxFiles {
			return broken(fmt.Errorf("more than %d entries", o.MaxFiles))
		}
		e := entryOf(&rec)
		out := sink
		if out != nil && (rec.Data || e.HardlinkOf != "") && taken[e.Path] {
			// Names are escaped injectively, so only a lying init repeats
			// one; the first entry written under a name keeps it, so that
			// the Result's hash is the hash of the file on disk.
			out = nil
			e.Skipped = "not copied: an earlier entry has the same name"
		}
		if rec.Data {
			if rec.Size < 0 || rec.Size > o.MaxFileBytes || total+rec.Size > o.MaxBytes {
				return broken(fmt.Errorf("%s: %d bytes is past the caps", e.Path, rec.Size))
			}
			total += rec.Size
			if out != nil {
				taken[e.Path] = true
			}
			if err := receiveContent(br, &rec, &e, out); err != nil {
				// The partial copy is gone; the entry is not listed.
				return entries, true, TruncatedTransfer, err
			}
			if e.CopiedTo != "" {
				copied[e.Path] = rec.Size
			}
		} else if e.HardlinkOf != "" && out != nil && e.Skipped == "" {
			if size, ok := copied[e.HardlinkOf]; ok {
				total += linkInto(out, &e, size, total, o.MaxBytes, taken)
			}
		}
		entries = append(entries, e)
	}
}

// linkInto makes e a hard link to the copy of the entry it links to,
// whose size is firstSize, if that fits the output cap; it returns the
// logical bytes it added to the output dir.
func linkInto(sink outputSink, e *FileEntry, firstSize, total, max int64, taken map[string]bool) int64 {
	if e.Size != firstSize {
		e.Skipped = fmt.Sprintf("not linked: %d bytes, but %s has %d", e.Size, e.HardlinkOf, firstSize)
		return 0
	}
	if total+firstSize > max {
		e.Skipped = fmt.Sprintf("not copied: the %d-byte output cap is reached", max)
		return 0
	}
	taken[e.Path] = true
	where, err := sink.link(e.HardlinkOf, e.Path)
	if err != nil {
		e.Skipped = fmt.Sprintf("not linked: %v", err)
		return 0
	}
	e.CopiedTo = where
	return firstSize
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

// sinkWriter keeps the first write error of a host copy and swallows it,
// so that a full disk stops the copy but not the reading of the stream,
// which must go on to the next record.
type sinkWriter struct {
	w   io.WriteCloser
	err error
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
	return len(p), nil
}

func (s *sinkWriter) close() error {
	if err := s.w.Close(); s.err == nil {
		s.err = err
	}
	return s.err
}

// receiveContent copies one file's bytes to the sink (or discards them)
// and checks them against the init's hash. A copy that did not end up
// whole and matching is removed from the output dir: nothing is left
// there that the Result does not list with its hash.
func receiveContent(br *bufio.Reader, rec *fileRecord, e *FileEntry, sink outputSink) error {
	h := sha256.New()
	var w io.Writer = h
	var out *sinkWriter
	if sink != nil {
		f, where, err := sink.create(e.Path)
		if err != nil {
			e.Skipped = fmt.Sprintf("not copied: %v", err)
		} else {
			out, e.CopiedTo = &sinkWriter{w: f}, where
			w = io.MultiWriter(h, out)
		}
	}
	n, err := io.CopyN(w, br, rec.Size)
	var werr error
	if out != nil {
		werr = out.close()
	}
	if err != nil {
		err = fmt.Errorf("files pipe: %s: the transfer broke after %d of %d bytes: %w", e.Path, n, rec.Size, err)
		if out != nil {
			if rerr := sink.remove(e.Path); rerr != nil {
				err = fmt.Errorf("%w; the partial copy %s stays: %v", err, e.CopiedTo, rerr)
			}
		}
		return err
	}
	switch got := hex.EncodeToString(h.Sum(nil)); {
	case got != rec.SHA256:
		e.Skipped, e.SHA256 = "content changed while it was read", got
	case werr != nil:
		e.Skipped = fmt.Sprintf("not copied: %v", werr)
	default:
		return nil
	}
	if out != nil {
		if rerr := sink.remove(e.Path); rerr != nil {
			e.Skipped += fmt.Sprintf("; the bad copy %s stays: %v", e.CopiedTo, rerr)
		}
	}
	e.CopiedTo = ""
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
