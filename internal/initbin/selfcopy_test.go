package initbin

import (
	"bytes"
	_ "embed"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// selfSource is bytes embedded in the test binary, as the image is in
// sbx: a source file of this package (any embedded file would do).
//
//go:embed selfcopy.go
var selfSource []byte

// TestCopyFromSelf: the memfd filled by sendfile from /proc/self/exe
// holds exactly the embedded bytes, sealed like the write(2) copy.
func TestCopyFromSelf(t *testing.T) {
	if len(selfSource) <= selfCopyPage {
		t.Fatalf("selfcopy.go is %d bytes: not longer than the page each end of which is compared", len(selfSource))
	}
	fd, err := sealedMemfdFilled("sbx-init-test", selfSource, copyFromSelf)
	if err != nil {
		t.Fatalf("sendfile copy of %d embedded bytes: %v", len(selfSource), err)
	}
	defer unix.Close(fd)
	got, err := os.ReadFile("/proc/self/fd/" + itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, selfSource) {
		t.Fatalf("memfd holds %d bytes, not the %d embedded ones", len(got), len(selfSource))
	}
	if _, err := unix.Write(fd, []byte("x")); err != unix.EPERM {
		t.Errorf("write to the sealed memfd: %v, want EPERM", err)
	}
}

// TestCopyFromSelfRefusesBytesNotInTheBinary: bytes of the heap lie in
// no segment of the file, and the copy says so rather than guess (the
// caller then writes them).
func TestCopyFromSelfRefusesBytesNotInTheBinary(t *testing.T) {
	heap := append([]byte(nil), selfSource...)
	fd, err := sealedMemfdFilled("sbx-init-test", heap, copyFromSelf)
	if err == nil {
		unix.Close(fd)
		t.Fatal("sendfile copy of heap bytes succeeded")
	}
	if !strings.Contains(err.Error(), "no file-backed PT_LOAD") {
		t.Errorf("error %q does not say the bytes are not in the binary", err)
	}
}

// TestSelfCopyCheck: a memfd that does not hold the image at either end
// (an offset computed wrong) is refused.
func TestSelfCopyCheck(t *testing.T) {
	img := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	for _, tc := range []struct {
		name string
		mod  func([]byte)
		ok   bool
	}{
		{"same", func([]byte) {}, true},
		{"first byte", func(b []byte) { b[0] ^= 1 }, false},
		{"last byte", func(b []byte) { b[len(b)-1] ^= 1 }, false},
		{"shifted", func(b []byte) { copy(b, b[1:]) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := memfdCreate("sbx-init-test")
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			b := append([]byte(nil), img...)
			tc.mod(b)
			if err := writeAll(fd, b); err != nil {
				t.Fatal(err)
			}
			if err := selfCopyCheck(fd, img); (err == nil) != tc.ok {
				t.Errorf("selfCopyCheck = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestLoadBiasAndOffset: the arithmetic for a non-PIE and a PIE
// executable, and the bounds of a segment's file-backed part.
func TestLoadBiasAndOffset(t *testing.T) {
	segs := []segment{
		{typ: ptPhdr, offset: 0x40, vaddr: 0x40, filesz: 0x2a0},
		{typ: ptLoad, offset: 0, vaddr: 0, filesz: 0x1000},
		{typ: ptLoad, offset: 0x1000, vaddr: 0x2000, filesz: 0x3000},
	}
	if b, err := loadBias(etExec, 0x40, segs, 0xdead); err != nil || b != 0 {
		t.Errorf("ET_EXEC bias = %#x, %v; want 0", b, err)
	}
	if b, err := loadBias(etDyn, 0x40, segs, 0x555500000040); err != nil || b != 0x555500000000 {
		t.Errorf("ET_DYN bias from PT_PHDR = %#x, %v", b, err)
	}
	if b, err := loadBias(etDyn, 0x40, segs[1:], 0x555500000040); err != nil || b != 0x555500000000 {
		t.Errorf("ET_DYN bias from the PT_LOAD holding e_phoff = %#x, %v", b, err)
	}
	if _, err := loadBias(etDyn, 0x40, segs, 0); err == nil {
		t.Error("ET_DYN without AT_PHDR: no error")
	}
	if _, err := loadBias(4, 0x40, segs, 0x40); err == nil {
		t.Error("ET_CORE: no error")
	}
	const bias = 0x555500000000
	for _, tc := range []struct {
		addr, n uint64
		off     int64
		ok      bool
	}{
		{bias + 0x2000, 0x10, 0x1000, true},
		{bias + 0x2100, 0x2f00, 0x1100, true},
		{bias + 0x2100, 0x2f01, 0, false}, // past filesz: .bss, not in the file
		{bias + 0x1800, 0x10, 0, false},   // between segments
		{0x2000, 0x10, 0, false},          // without the bias
		{bias + 0x2000, ^uint64(0), 0, false},
	} {
		off, err := fileOffset(segs, bias, tc.addr, tc.n)
		if (err == nil) != tc.ok || tc.ok && off != tc.off {
			t.Errorf("fileOffset(%#x, %#x) = %#x, %v; want %#x, ok %v", tc.addr, tc.n, off, err, tc.off, tc.ok)
		}
	}
}

func TestStartsEarly(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"sbx", "exec", "--", "/bin/true"}, true},
		{[]string{"sbx", "serve"}, false},
		{[]string{"sbx", "__sbx_init"}, false},
		{[]string{"sbx", "help", "exec"}, false},
		{[]string{"sbx"}, false},
		{nil, false},
	} {
		if got := startsEarly(tc.argv); got != tc.want {
			t.Errorf("startsEarly(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDescribeNamesTheFailedSendfile: where neither copy made a memfd,
// Describe (the Result's namespaces layer, doctor) names both failures,
// once when they are the same (memfd_create itself failed).
func TestDescribeNamesTheFailedSendfile(t *testing.T) {
	for _, tc := range []struct {
		e    Exe
		want string
	}{
		{Exe{Kind: KindSelf, Why: "write: ENOSPC", CopyWhy: "open /proc/self/exe O_RDONLY: permission denied"},
			"sbx itself re-executed (/proc/self/exe): write: ENOSPC (after the sendfile from /proc/self/exe failed: open /proc/self/exe O_RDONLY: permission denied)"},
		{Exe{Kind: KindSelf, Why: "memfd_create: EMFILE", CopyWhy: "memfd_create: EMFILE"},
			"sbx itself re-executed (/proc/self/exe): memfd_create: EMFILE"},
		{Exe{Kind: KindMemfd, Size: 3 << 20, Copy: CopyWrite, CopyWhy: "x"},
			"sbx-init (3.0 MB static, no cgo), from a sealed memfd"},
	} {
		if got := tc.e.Describe(); got != tc.want {
			t.Errorf("Describe(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
