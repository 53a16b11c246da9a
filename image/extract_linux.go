package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits bound what one image may make sbx write and remember. A layer is
// hostile input: without them a 10 GB sparse entry or a million empty
// files would fill the store's disk or sbx's memory.
type Limits struct {
	// MaxBytes is the most bytes of entry data, over all layers (the
	// size a header declares counts, skipped entries' included, so a
	// sparse or skipped entry cannot make sbx read without bound).
	MaxBytes int64
	// MaxEntryBytes is the largest one entry may declare itself: a sparse
	// entry's holes would be written out as zeros, so a 10 GB sparse file
	// is refused from its header rather than made dense.
	MaxEntryBytes int64
	// MaxEntries is the most tar headers, over all layers.
	MaxEntries int
	// MaxNameLen is the longest entry name or link target, in bytes
	// (PATH_MAX, 4096, in linux/limits.h).
	MaxNameLen int
	// MaxDepth is the most path components of an entry name.
	MaxDepth int
	// MaxNameBytes bounds the names one layer's entries add up to: the
	// extractor keeps them to spare a layer's own entries from its
	// whiteouts (OCI image-spec layer.md: a whiteout applies to lower
	// layers only).
	MaxNameBytes int64
	// MaxLayers is the most layers an image may have (overlayfs-based
	// runtimes stop at 128 lower directories).
	MaxLayers int
}

// headerAllowance is what each entry may add to the tar stream besides
// its data (its 512-byte header, a PAX or GNU long-name record): past
// MaxBytes plus this per entry, a layer is refused, so that headers
// alone (each may carry 1 MiB of PAX records) cannot make sbx read
// without bound.
const headerAllowance = 4 << 10

// streamCap is the most bytes of uncompressed tar an image may be.
func (l Limits) streamCap() int64 { return l.MaxBytes + int64(l.MaxEntries)*headerAllowance }

// DefaultLimits fit a data-science image (Debian with numpy, pandas,
// scipy and matplotlib is about 50,000 entries and 600 MB) many times over.
var DefaultLimits = Limits{
	MaxBytes:      16 << 30,
	MaxEntryBytes: 4 << 30,
	MaxEntries:    500_000,
	MaxNameLen:    4096,
	MaxDepth:      128,
	MaxNameBytes:  64 << 20,
	MaxLayers:     256,
}

// Stats say what an extraction did.
type Stats struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Skipped counts the entries not made: devices, FIFOs, sockets and
	// types sbx does not know.
	Skipped int `json:"skipped"`
	// Stripped counts the files whose setuid or setgid bit was dropped.
	Stripped  int `json:"stripped"`
	Whiteouts int `json:"whiteouts"`
}

// whiteoutPrefix and opaqueMarker are the OCI image-spec's whiteouts
// (layer.md, "Whiteouts"): ".wh.NAME" deletes NAME of the lower layers,
// ".wh..wh..opq" deletes everything the lower layers had in its directory.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// Extractor applies an image's layers, in order, to one directory. Every
// path is resolved with openat2(RESOLVE_IN_ROOT) below the directory's fd:
// "..", absolute symlinks and symlinks planted by an earlier entry all
// resolve inside it (openat2(2), Linux 5.6), and the last component of an
// entry is never followed. Nothing is chowned (owners are flattened to
// whoever runs sbx: a rootless run cannot represent others), no xattr is
// set (so no file capability, security.capability, survives), and
// setuid/setgid bits are dropped.
type Extractor struct {
	root      int
	lim       Limits
	st        Stats
	layer     map[string]bool
	opaqued   map[string]bool
	nameBytes int64
	// read counts the uncompressed bytes of every layer so far, against
	// Limits.streamCap.
	read int64
}

// NewExtractor opens dir, an empty directory that the caller made, as the
// image's root.
func NewExtractor(dir string, lim Limits) (*Extractor, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s (O_PATH|O_DIRECTORY|O_NOFOLLOW): %w", dir, err)
	}
	return &Extractor{root: fd, lim: lim}, nil
}

// Close releases the root's fd.
func (x *Extractor) Close() error {
	if x.root < 0 {
		return nil
	}
	err := unix.Close(x.root)
	x.root = -1
	return err
}

// Stats are the totals so far.
func (x *Extractor) Stats() Stats { return x.st }

// EntryError names the entry a layer was refused for.
type EntryError struct {
	Name   string
	Reason string
	Err    error
}

func (e *EntryError) Error() string {
	msg := fmt.Sprintf("layer entry %q: %s", e.Name, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *EntryError) Unwrap() error { return e.Err }

// Apply extracts one uncompressed layer tarball. An error refuses the
// whole image: the caller throws the directory away.
func (x *Extractor) Apply(r io.Reader) error {
	x.layer, x.opaqued = map[string]bool{}, map[string]bool{}
	x.nameBytes = 0
	tr := tar.NewReader(&capReader{r: r, n: &x.read, max: x.lim.streamCap()})
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("layer: read tar header after %d entries: %w", x.st.Entries, err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
}

func (x *Extractor) entry(hdr *tar.Header, data io.Reader) error {
	refuse := func(reason string, err error) error {
		return &EntryError{Name: hdr.Name, Reason: reason, Err: err}
	}
	x.st.Entries++
	if x.st.Entries > x.lim.MaxEntries {
		return refuse(fmt.Sprintf("more than %d entries in the image", x.lim.MaxEntries), nil)
	}
	if x.lim.MaxEntryBytes > 0 && hdr.Size > x.lim.MaxEntryBytes {
		return refuse(fmt.Sprintf("size %d, more than %d for one entry", hdr.Size, x.lim.MaxEntryBytes), nil)
	}
	if hdr.Size < 0 || hdr.Size > x.lim.MaxBytes-x.st.Bytes {
		return refuse(fmt.Sprintf("size %d takes the image past %d bytes", hdr.Size, x.lim.MaxBytes), nil)
	}
	x.st.Bytes += hdr.Size
	name, err := x.cleanName(hdr.Name)
	if err != nil {
		return refuse(err.Error(), nil)
	}
	if name == "" {
		return nil // the root itself: its mode is sbx's
	}
	x.nameBytes += int64(len(name))
	if x.nameBytes > x.lim.MaxNameBytes {
		return refuse(fmt.Sprintf("the layer's names add up to more than %d bytes", x.lim.MaxNameBytes), nil)
	}
	dir, base := splitName(name)
	if base == opaqueMarker {
		x.st.Whiteouts++
		if err := x.opaque(dir); err != nil {
			return refuse("opaque whiteout", err)
		}
		return nil
	}
	if target, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
		x.st.Whiteouts++
		if target == "" || target == "." || target == ".." || strings.HasPrefix(target, whiteoutPrefix) {
			return refuse("whiteout of "+target+": not a name", nil)
		}
		if err := x.whiteout(joinName(dir, target)); err != nil {
			return refuse("whiteout", err)
		}
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	default:
		// Devices, FIFOs and the rest: a device node is a way out of
		// any sandbox that can open it, and the sandbox's /dev is its
		// own.
		x.st.Skipped++
		return nil
	}
	x.layer[name] = true
	parent, err := x.mkdirAll(dir)
	if err != nil {
		return refuse("make its directory", err)
	}
	defer unix.Close(parent)
	mode := uint32(hdr.Mode) & 0o7777
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 && hdr.Typeflag != tar.TypeDir {
		x.st.Stripped++
	}
	mode &^= unix.S_ISUID | unix.S_ISGID
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.makeDir(parent, base, mode)
	case tar.TypeReg:
		err = x.makeFile(parent, base, mode, data, hdr.Size)
	case tar.TypeSymlink:
		if len(hdr.Linkname) > x.lim.MaxNameLen || hdr.Linkname == "" {
			return refuse(fmt.Sprintf("symlink target of %d bytes (1 to %d)", len(hdr.Linkname), x.lim.MaxNameLen), nil)
		}
		err = x.makeSymlink(parent, base, hdr.Linkname)
	case tar.TypeLink:
		err = x.makeHardlink(parent, base, hdr.Linkname)
	}
	if err != nil {
		return refuse("make the "+typeName(hdr.Typeflag), err)
	}
	return nil
}

// cleanName makes an entry name relative to the root. A leading "/" is
// dropped (as GNU tar does); any ".." component refuses the entry, as do
// names past the length and depth caps. "" is the root itself.
func (x *Extractor) cleanName(n string) (string, error) {
	if len(n) > x.lim.MaxNameLen {
		return "", fmt.Errorf("name of %d bytes, more than %d", len(n), x.lim.MaxNameLen)
	}
	if strings.IndexByte(n, 0) >= 0 {
		return "", errors.New("NUL in name")
	}
	var parts []string
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", errors.New(`".." in name`)
		}
		if len(p) > 255 {
			return "", fmt.Errorf("component of %d bytes, more than NAME_MAX (255)", len(p))
		}
		parts = append(parts, p)
	}
	if len(parts) > x.lim.MaxDepth {
		return "", fmt.Errorf("%d components deep, more than %d", len(parts), x.lim.MaxDepth)
	}
	return strings.Join(parts, "/"), nil
}

func splitName(name string) (dir, base string) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

func joinName(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// openInRoot opens the directory name below the root, every symlink on
// the way resolved as if the root were "/" (RESOLVE_IN_ROOT), no magic
// links (/proc/self/...) and no other filesystem (RESOLVE_NO_XDEV).
func (x *Extractor) openInRoot(name string) (int, error) {
	if name == "" {
		name = "."
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for {
		fd, err := unix.Openat2(x.root, name, &how)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			// openat2 returns EAGAIN when a rename raced the lookup
			// with RESOLVE_IN_ROOT; nothing else renames here.
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("openat2 %q (RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV): %w", name, err)
		}
		return fd, nil
	}
}

// mkdirAll opens dir below the root, making the directories that are
// missing (a layer need not list them), and returns its fd.
func (x *Extractor) mkdirAll(dir string) (int, error) {
	fd, err := x.openInRoot(dir)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	parent, base := splitName(dir)
	pfd, err := x.mkdirAll(parent)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("mkdirat %q: %w", dir, err)
	}
	return x.openInRoot(dir)
}

// lstatAt is fstatat(AT_SYMLINK_NOFOLLOW): what is at base itself.
func lstatAt(dirfd int, base string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// clear removes what is at base unless it is a directory and keepDir.
func clear(dirfd int, base string, keepDir bool) error {
	st, err := lstatAt(dirfd, base)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fstatat %q: %w", base, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if keepDir {
			return nil
		}
		return removeAllAt(dirfd, base)
	}
	if err := unix.Unlinkat(dirfd, base, 0); err != nil {
		return fmt.Errorf("unlinkat %q: %w", base, err)
	}
	return nil
}

// makeDir makes base a directory, keeping one that is there (a later
// layer adds to it). The owner keeps rwx while layers are applied; Seal
// takes the write bits away.
func (x *Extractor) makeDir(parent int, base string, mode uint32) error {
	if err := clear(parent, base, true); err != nil {
		return err
	}
	if err := unix.Mkdirat(parent, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdirat %q: %w", base, err)
	}
	fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("openat %q (O_DIRECTORY|O_NOFOLLOW): %w", base, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o700|mode&0o1077); err != nil {
		return fmt.Errorf("fchmod %q %#o: %w", base, 0o700|mode&0o1077, err)
	}
	return nil
}

// makeFile writes size bytes of data to a new file base, read-only.
func (x *Extractor) makeFile(parent int, base string, mode uint32, data io.Reader, size int64) error {
	if err := clear(parent, base, false); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("openat %q (O_CREAT|O_EXCL|O_NOFOLLOW): %w", base, err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.CopyN(f, data, size); err != nil {
		return fmt.Errorf("write %q: %w", base, err)
	}
	// The owner can always read: whoever runs the sandbox is the owner
	// (or, as root, reads anyway).
	final := (mode | 0o400) &^ 0o222
	if err := f.Chmod(os.FileMode(final & 0o777)); err != nil {
		return fmt.Errorf("fchmod %q %#o: %w", base, final, err)
	}
	return f.Close()
}

func (x *Extractor) makeSymlink(parent int, base, target string) error {
	if err := clear(parent, base, false); err != nil {
		return err
	}
	// The target is stored as it is: sbx resolves it only inside the
	// root (openInRoot), and the sandbox only inside its own "/".
	if err := unix.Symlinkat(target, parent, base); err != nil {
		return fmt.Errorf("symlinkat %q -> %q: %w", base, target, err)
	}
	return nil
}

// makeHardlink links base to an earlier entry: a regular file already in
// the tree, found below the root (never a directory, a symlink's target
// or anything outside).
func (x *Extractor) makeHardlink(parent int, base, linkname string) error {
	target, err := x.cleanName(linkname)
	if err != nil || target == "" {
		return fmt.Errorf("hardlink target %q: %v", linkname, err)
	}
	tdir, tbase := splitName(target)
	tfd, err := x.openInRoot(tdir)
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", linkname, err)
	}
	defer unix.Close(tfd)
	st, err := lstatAt(tfd, tbase)
	if err != nil {
		return fmt.Errorf("hardlink target %q, no earlier entry: %w", linkname, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("hardlink target %q: not a regular file (mode %#o)", linkname, st.Mode)
	}
	var self unix.Stat_t
	if s, err := lstatAt(parent, base); err == nil {
		self = s
		if self.Ino == st.Ino && self.Dev == st.Dev {
			return nil
		}
	}
	if err := clear(parent, base, false); err != nil {
		return err
	}
	if err := unix.Linkat(tfd, tbase, parent, base, 0); err != nil {
		return fmt.Errorf("linkat %q -> %q: %w", base, linkname, err)
	}
	return nil
}

// whiteout removes name as the lower layers left it.
func (x *Extractor) whiteout(name string) error {
	if x.layer[name] {
		return nil
	}
	dir, base := splitName(name)
	fd, err := x.openInRoot(dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return clear(fd, base, false)
}

// opaque empties dir of what the lower layers put there, keeping this
// layer's own entries.
func (x *Extractor) opaque(dir string) error {
	// Once per directory and layer: what the layer adds after the
	// marker is its own, so a second marker has nothing to remove (and
	// a layer repeating it must not make sbx list a big directory again
	// for each).
	if x.opaqued[dir] {
		return nil
	}
	x.opaqued[dir] = true
	fd, err := x.mkdirAll(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("read %q: %w", dir, err)
	}
	for _, n := range names {
		if !x.layer[joinName(dir, n)] {
			if err := clear(fd, n, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrStreamCap is the error of a layer stream past Limits.streamCap.
var ErrStreamCap = errors.New("the image's uncompressed layers are past the size cap (data plus headers)")

// capReader fails once more than max bytes have been read through it
// (n is shared by an image's layers).
type capReader struct {
	r   io.Reader
	n   *int64
	max int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if *c.n >= c.max {
		return 0, ErrStreamCap
	}
	if int64(len(b)) > c.max-*c.n {
		b = b[:c.max-*c.n+1]
	}
	n, err := c.r.Read(b)
	*c.n += int64(n)
	if *c.n > c.max {
		return n, ErrStreamCap
	}
	return n, err
}

// readDirNames lists the directory at fd (an O_PATH fd is reopened).
func readDirNames(fd int) ([]string, error) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("openat . (O_DIRECTORY): %w", err)
	}
	d := os.NewFile(uintptr(dfd), ".")
	defer d.Close()
	return d.Readdirnames(-1)
}

// removeAllAt removes the directory base below dirfd and everything in
// it, never following a symlink (each level is opened O_NOFOLLOW).
func removeAllAt(dirfd int, base string) error {
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("openat %q (O_DIRECTORY|O_NOFOLLOW): %w", base, err)
	}
	// Seal took the write bit away; the owner gives it back to empty it.
	if err := unix.Fchmod(fd, 0o700); err != nil {
		unix.Close(fd)
		return fmt.Errorf("fchmod %q 0700: %w", base, err)
	}
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = clear(fd, n, false); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("unlinkat %q (AT_REMOVEDIR): %w", base, err)
	}
	return nil
}

// Seal takes the write bits off every directory of the tree (files have
// none already): the unpacked image is read-only on disk too, not only
// through the sandbox's read-only mount.
func (x *Extractor) Seal() error {
	return sealDir(x.root, ".", 0)
}

func sealDir(parent int, base string, depth int) error {
	fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("openat %q (O_DIRECTORY|O_NOFOLLOW): %w", base, err)
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		st, err := lstatAt(fd, n)
		if err != nil {
			return fmt.Errorf("fstatat %q: %w", n, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := sealDir(fd, n, depth+1); err != nil {
				return err
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %q: %w", base, err)
	}
	mode := (st.Mode & 0o1777) &^ 0o222
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("fchmod %q %#o: %w", base, mode, err)
	}
	return nil
}

// RemoveTree removes a tree the extractor made (sealed or not), never
// following a symlink out of it.
func RemoveTree(dir string) error {
	parent, base := splitPath(dir)
	fd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", parent, err)
	}
	defer unix.Close(fd)
	err = clear(fd, base, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func splitPath(p string) (string, string) {
	p = strings.TrimRight(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

func typeName(t byte) string {
	switch t {
	case tar.TypeDir:
		return "directory"
	case tar.TypeReg:
		return "file"
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hardlink"
	}
	return fmt.Sprintf("entry of type %q", t)
}
