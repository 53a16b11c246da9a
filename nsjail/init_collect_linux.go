package nsjail

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// collector walks the workspace once the payload and every process of the
// sandbox are gone, inside the jail, so that a link planted there can only
// ever point inside it. It never follows a symlink, opens every entry
// relative to its directory's fd with O_NOFOLLOW, and checks the type of
// what it opened. Regular files are listed with their hash (and content,
// when asked); links are recorded; FIFOs, sockets and devices are listed
// as skipped. Every cap stops the walk cleanly, and so does its deadline:
// the walk runs after the payload, outside the run's limits, so it bounds
// itself in time (o.WalkTimeout) and in hashing (o.MaxHashBytes).
type collector struct {
	w        *bufio.Writer
	o        OutputSpec
	inputs   map[string]string // path -> sha256 of the input written at start
	seen     map[string]bool
	links    map[[2]uint64]linkInfo
	n        int64 // records written
	total    int64 // logical bytes sent to the output dir, hardlinks included
	hashed   int64 // logical bytes hashed, holes included
	deadline time.Time
	cut      Truncation // what stopped the walk: the listing is incomplete
	dirbuf   []byte
	buf      []byte
}

type linkInfo struct {
	name   []byte
	sha256 string
}

func newCollector(w io.Writer, o OutputSpec, inputs map[string]string) *collector {
	return &collector{
		w: bufio.NewWriterSize(w, 64<<10), o: o, inputs: inputs,
		seen: map[string]bool{}, links: map[[2]uint64]linkInfo{},
		deadline: time.Now().Add(o.WalkTimeout),
		dirbuf:   make([]byte, 32<<10), buf: make([]byte, 64<<10),
	}
}

// collect reports every changed entry below root, then the deleted
// inputs, then the end record.
func (c *collector) collect(root string) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{"open", root, err}
	}
	err = c.walkDir(fd, nil, 1)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if c.cut == NotTruncated {
		for name := range c.inputs {
			if !c.seen[name] && !c.capped() {
				if err := c.emit(&fileRecord{Name: []byte(name), Kind: "file", Change: ChangeDeleted}, nil); err != nil {
					return err
				}
			}
		}
	}
	if err := c.emit(&fileRecord{Kind: recordEnd, Truncated: c.cut != NotTruncated, Cut: string(c.cut)}, nil); err != nil {
		return err
	}
	return c.w.Flush()
}

// capped says whether the walk must stop here, and records why.
func (c *collector) capped() bool {
	switch {
	case c.cut != NotTruncated:
	case c.n >= c.o.MaxFiles:
		c.cut = TruncatedFiles
	case time.Now().After(c.deadline):
		c.cut = TruncatedWalkTimeout
	}
	return c.cut != NotTruncated
}

func (c *collector) walkDir(dirfd int, prefix []byte, depth int) error {
	var names []string
	for {
		n, err := unix.Getdents(dirfd, c.dirbuf)
		if err != nil {
			return &pathError{"getdents", string(prefix), err}
		}
		if n == 0 {
			return nil
		}
		_, _, names = unix.ParseDirent(c.dirbuf[:n], -1, names[:0])
		for _, name := range names {
			if c.capped() {
				return nil
			}
			if err := c.entry(dirfd, prefix, name, depth); err != nil {
				return err
			}
		}
	}
}

func join(prefix []byte, name string) []byte {
	if len(prefix) == 0 {
		return []byte(name)
	}
	out := make([]byte, 0, len(prefix)+1+len(name))
	return append(append(append(out, prefix...), '/'), name...)
}

func (c *collector) entry(dirfd int, prefix []byte, name string, depth int) error {
	rel := join(prefix, name)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return c.emit(&fileRecord{Name: rel, Kind: "unknown", Change: c.change(rel), Reason: fmt.Sprintf("skipped: stat: %v", err)}, nil)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if depth >= c.o.MaxDepth {
			return c.emit(&fileRecord{Name: rel, Kind: "dir", Change: ChangeCreated, Reason: fmt.Sprintf("skipped: deeper than %d levels", c.o.MaxDepth)}, nil)
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return c.emit(&fileRecord{Name: rel, Kind: "dir", Change: ChangeCreated, Reason: fmt.Sprintf("skipped: open: %v", err)}, nil)
		}
		err = c.walkDir(fd, rel, depth+1)
		unix.Close(fd)
		return err
	case unix.S_IFREG:
		return c.file(dirfd, name, rel, &st)
	case unix.S_IFLNK:
		target := make([]byte, 4096)
		n, err := unix.Readlinkat(dirfd, name, target)
		rec := &fileRecord{Name: rel, Kind: "symlink", Change: c.change(rel), Size: int64(n)}
		if err != nil {
			rec.Reason = fmt.Sprintf("skipped: readlink: %v", err)
		} else {
			rec.Target = target[:n]
		}
		return c.emit(rec, nil)
	default:
		return c.emit(&fileRecord{Name: rel, Kind: fileKind(st.Mode), Change: c.change(rel), Reason: "skipped: not a regular file"}, nil)
	}
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "unknown"
}

// change is created for new names and modified for inputs; it also marks
// the input as seen.
func (c *collector) change(rel []byte) string {
	if _, ok := c.inputs[string(rel)]; ok {
		c.seen[string(rel)] = true
		return ChangeModified
	}
	return ChangeCreated
}

func (c *collector) file(dirfd int, name string, rel []byte, st *unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if first, ok := c.links[key]; ok {
		// Hardlinked content crosses once, however many names it has;
		// each name still counts against the output cap, as a consumer
		// reading the output dir reads it once per name.
		rec := &fileRecord{Name: rel, Kind: "file", Change: c.change(rel), Size: st.Size, SHA256: first.sha256, LinkOf: first.name}
		if c.o.Send {
			if c.total+st.Size > c.o.MaxBytes {
				rec.Reason = fmt.Sprintf("not copied: the %d-byte output cap is reached", c.o.MaxBytes)
			} else {
				c.total += st.Size
			}
		}
		return c.emit(rec, nil)
	}
	rec := &fileRecord{Name: rel, Kind: "file", Size: st.Size}
	inputHash, isInput := c.inputs[string(rel)]
	if isInput {
		c.seen[string(rel)] = true
		rec.Change = ChangeModified
	} else {
		rec.Change = ChangeCreated
	}
	// An input is hashed whatever its size, or an unchanged one past the
	// cap would be reported modified; the hash budget bounds it.
	if st.Size > c.o.MaxFileBytes && !isInput {
		rec.Reason = fmt.Sprintf("skipped: %d bytes is more than the %d-byte cap per file", st.Size, c.o.MaxFileBytes)
		return c.emit(rec, nil)
	}
	if c.hashed+st.Size > c.o.MaxHashBytes {
		// The listing ends here: what follows is not known. Nor is
		// whether an input changed: it is left out like what follows.
		c.cut = TruncatedHashBytes
		if isInput {
			return nil
		}
		rec.Reason = fmt.Sprintf("not hashed: the report hashes at most %d bytes", c.o.MaxHashBytes)
		return c.emit(rec, nil)
	}
	c.hashed += st.Size
	// O_NONBLOCK: should the entry have become a FIFO, open must not wait.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		rec.Reason = fmt.Sprintf("skipped: open: %v", err)
		return c.emit(rec, nil)
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG || fst.Ino != st.Ino || fst.Size != st.Size {
		rec.Reason = "skipped: changed while it was read"
		return c.emit(rec, nil)
	}
	sum, err := c.hash(fd, st.Size)
	if errors.Is(err, errWalkDeadline) {
		c.cut = TruncatedWalkTimeout
		if isInput {
			return nil
		}
		rec.Reason = fmt.Sprintf("not hashed: the report's %v deadline passed", c.o.WalkTimeout.Round(time.Millisecond))
		return c.emit(rec, nil)
	}
	if err != nil {
		rec.Reason = fmt.Sprintf("skipped: read: %v", err)
		return c.emit(rec, nil)
	}
	rec.SHA256 = sum
	if st.Nlink > 1 {
		c.links[key] = linkInfo{rel, sum}
	}
	if isInput && sum == inputHash {
		return nil // an input, unchanged
	}
	if !c.o.Send {
		return c.emit(rec, nil)
	}
	if st.Size > c.o.MaxFileBytes {
		rec.Reason = fmt.Sprintf("not copied: %d bytes is more than the %d-byte cap per file", st.Size, c.o.MaxFileBytes)
		return c.emit(rec, nil)
	}
	if c.total+st.Size > c.o.MaxBytes {
		rec.Reason = fmt.Sprintf("not copied: the %d-byte output cap is reached", c.o.MaxBytes)
		return c.emit(rec, nil)
	}
	c.total += st.Size
	rec.Data = true
	return c.emit(rec, &holeReader{fd: fd, size: st.Size})
}

var errWalkDeadline = errors.New("the walk's deadline passed")

// hash is the sha256 of the file's logical content, holes read as zeros
// without reading them. It gives up at the walk's deadline: one 128 MiB
// file takes a fraction of a second, but the file is not the only one.
func (c *collector) hash(fd int, size int64) (string, error) {
	h := sha256.New()
	r := &holeReader{fd: fd, size: size}
	for {
		n, err := r.Read(c.buf)
		h.Write(c.buf[:n])
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
		if time.Now().After(c.deadline) {
			return "", errWalkDeadline
		}
	}
}

// holeReader reads a regular file's first size bytes with pread, leaving
// the fd's offset to lseek. Holes are found with lseek(2) SEEK_DATA and
// SEEK_HOLE (Linux 3.1; tmpfs since 3.8) and read as zeros without a
// syscall: a sparse 128 MiB file costs no reads, only its hash. A file
// system without them reports all of the file as data (SEEK_HOLE at EOF).
type holeReader struct {
	fd     int
	off    int64
	size   int64
	segEnd int64 // [off, segEnd) is one segment, a hole when inHole
	inHole bool
}

func (r *holeReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.off >= r.segEnd {
		r.locate()
	}
	if want := r.segEnd - r.off; int64(len(p)) > want {
		p = p[:want]
	}
	if r.inHole {
		clear(p)
		r.off += int64(len(p))
		return len(p), nil
	}
	n, err := unix.Pread(r.fd, p, r.off)
	if err != nil {
		return 0, fmt.Errorf("pread at %d: %w", r.off, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("pread at %d: %w", r.off, io.ErrUnexpectedEOF)
	}
	r.off += int64(n)
	return n, nil
}

// locate finds the segment that starts at r.off.
func (r *holeReader) locate() {
	r.inHole, r.segEnd = false, r.size
	data, err := unix.Seek(r.fd, r.off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		// No data from off to EOF (lseek(2)): the rest is a hole.
		r.inHole = true
	case err != nil:
		// SEEK_DATA unsupported: read it all.
	case data > r.off:
		r.inHole, r.segEnd = true, min(data, r.size)
	default:
		if hole, err := unix.Seek(r.fd, r.off, unix.SEEK_HOLE); err == nil && hole > r.off {
			r.segEnd = min(hole, r.size)
		}
	}
}

func (c *collector) emit(rec *fileRecord, content io.Reader) error {
	if rec.Kind != recordEnd {
		c.n++
	}
	line, err := encodeLine(rec)
	if err != nil {
		return err
	}
	if _, err := c.w.Write(line); err != nil {
		return fmt.Errorf("files pipe: %w", err)
	}
	if content != nil {
		if n, err := io.CopyBuffer(c.w, content, c.buf); err != nil || n != rec.Size {
			return fmt.Errorf("files pipe: %s: wrote %d of %d bytes: %v", strings.ToValidUTF8(string(rec.Name), "?"), n, rec.Size, err)
		}
	}
	return nil
}
