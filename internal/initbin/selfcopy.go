package initbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The memfd is filled from the running executable's own file, by
// sendfile(2) at the offset where the embedded image lies in it, rather
// than by write(2) from the image's bytes in memory (issue 13). Both copy
// 2.9 MB into fresh shmem pages, which is most of the cost, but write(2)
// first faults the image's pages into the supervisor (~50 faults, each
// mapping a 64 KB fault-around window of the binary, then dropped again
// by dropPages), and sendfile's copy goes page cache to page cache in the
// kernel. The source is /proc/self/exe: the inode this process's own code
// is mapped from, which execve(2) keeps write-denied (ETXTBSY) while any
// process runs it, so its bytes at that offset are the image's; a
// sampled compare (selfCopyCheck) catches an offset computed wrong, and
// any failure falls back to write(2) (makeMemfd).

// ELF64 constants (<elf.h>, elf(5)): the header's fields used here and the
// program header types.
const (
	elfHeaderSize = 64
	ptLoad        = 1 // PT_LOAD
	ptPhdr        = 6 // PT_PHDR
	atPhdr        = 3 // AT_PHDR: the program headers' address in memory (getauxval(3))
	etExec        = 2 // ET_EXEC: no load bias
	etDyn         = 3 // ET_DYN: a PIE, loaded at a bias read from AT_PHDR
)

// segment is one PT_LOAD (or PT_PHDR) program header, the fields used.
type segment struct {
	typ                   uint32
	offset, vaddr, filesz uint64
}

// elfSegments reads the program headers of the ELF64 little-endian file
// at fd (pread(2): fd's offset is left alone) and its type.
func elfSegments(fd int) (etype uint16, phoff uint64, segs []segment, err error) {
	var eh [elfHeaderSize]byte
	if err := preadFull(fd, eh[:], 0); err != nil {
		return 0, 0, nil, fmt.Errorf("pread /proc/self/exe (ELF header): %w", err)
	}
	if !bytes.Equal(eh[:4], []byte("\x7fELF")) || eh[4] != 2 || eh[5] != 1 {
		return 0, 0, nil, errors.New("/proc/self/exe is not a little-endian ELF64 file")
	}
	etype = binary.LittleEndian.Uint16(eh[16:])
	phoff = binary.LittleEndian.Uint64(eh[32:])
	phentsize := int(binary.LittleEndian.Uint16(eh[54:]))
	phnum := int(binary.LittleEndian.Uint16(eh[56:]))
	if phentsize < 56 || phnum == 0 || phnum > 256 {
		return 0, 0, nil, fmt.Errorf("/proc/self/exe: %d program headers of %d bytes", phnum, phentsize)
	}
	ph := make([]byte, phentsize*phnum)
	if err := preadFull(fd, ph, int64(phoff)); err != nil {
		return 0, 0, nil, fmt.Errorf("pread /proc/self/exe (program headers): %w", err)
	}
	for i := 0; i < phnum; i++ {
		p := ph[i*phentsize:]
		segs = append(segs, segment{
			typ:    binary.LittleEndian.Uint32(p[0:]),
			offset: binary.LittleEndian.Uint64(p[8:]),
			vaddr:  binary.LittleEndian.Uint64(p[16:]),
			filesz: binary.LittleEndian.Uint64(p[32:]),
		})
	}
	return etype, phoff, segs, nil
}

// loadBias is what the kernel added to every p_vaddr when it mapped the
// executable: 0 for ET_EXEC; for a PIE, AT_PHDR minus the program
// headers' own p_vaddr (PT_PHDR, or the PT_LOAD that holds e_phoff).
func loadBias(etype uint16, phoff uint64, segs []segment, auxPhdr uint64) (uint64, error) {
	switch etype {
	case etExec:
		return 0, nil
	case etDyn:
	default:
		return 0, fmt.Errorf("/proc/self/exe: ELF type %d, neither ET_EXEC nor ET_DYN", etype)
	}
	if auxPhdr == 0 {
		return 0, errors.New("no AT_PHDR in the auxiliary vector")
	}
	for _, s := range segs {
		if s.typ == ptPhdr {
			return auxPhdr - s.vaddr, nil
		}
	}
	for _, s := range segs {
		if s.typ == ptLoad && phoff >= s.offset && phoff < s.offset+s.filesz {
			return auxPhdr - (s.vaddr + phoff - s.offset), nil
		}
	}
	return 0, errors.New("/proc/self/exe: no segment maps the program headers")
}

// fileOffset is where the n bytes at address addr of this process's
// image lie in its executable file: inside one PT_LOAD's file-backed part
// (not its zero-filled .bss tail), or an error.
func fileOffset(segs []segment, bias, addr, n uint64) (int64, error) {
	for _, s := range segs {
		if s.typ != ptLoad {
			continue
		}
		start := s.vaddr + bias
		if addr >= start && addr+n <= start+s.filesz && addr+n >= addr {
			return int64(addr - start + s.offset), nil
		}
	}
	return 0, fmt.Errorf("the %d bytes at %#x are in no file-backed PT_LOAD segment of /proc/self/exe", n, addr)
}

// auxPhdr is the AT_PHDR value of this process's auxiliary vector, 0 if
// unknown.
func auxPhdr() uint64 {
	vec, err := unix.Auxv()
	if err != nil {
		return 0
	}
	for _, kv := range vec {
		if kv[0] == atPhdr {
			return uint64(kv[1])
		}
	}
	return 0
}

// imageOffset is where img, bytes embedded in this executable, lie in its
// file, open at src (/proc/self/exe).
func imageOffset(src int, img []byte) (int64, error) {
	etype, phoff, segs, err := elfSegments(src)
	if err != nil {
		return 0, err
	}
	bias, err := loadBias(etype, phoff, segs, auxPhdr())
	if err != nil {
		return 0, err
	}
	return fileOffset(segs, bias, uint64(uintptr(unsafe.Pointer(&img[0]))), uint64(len(img)))
}

// copyFromSelf fills fd with img by sendfile(2) from /proc/self/exe, img
// being bytes embedded in this executable.
func copyFromSelf(fd int, img []byte) error {
	if len(img) == 0 {
		return errors.New("nothing to copy")
	}
	src, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /proc/self/exe O_RDONLY: %w", err)
	}
	defer unix.Close(src)
	off, err := imageOffset(src, img)
	if err != nil {
		return err
	}
	start := off
	for done := 0; done < len(img); {
		n, err := unix.Sendfile(fd, src, &off, len(img)-done)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("sendfile(memfd, /proc/self/exe, offset %d, %d bytes) after %d bytes: %w", start, len(img), done, err)
		}
		if n == 0 {
			return fmt.Errorf("sendfile(memfd, /proc/self/exe, offset %d, %d bytes): end of file after %d bytes", start, len(img), done)
		}
		done += n
	}
	return selfCopyCheck(fd, img)
}

// selfCopyPage is how much of each end of the image selfCopyCheck
// compares.
const selfCopyPage = 4096

// selfCopyCheck compares the memfd's first and last bytes (a page each)
// with the image's: an offset computed wrong (another segment, a bias
// off) copies other bytes of the binary, which this catches, at the cost
// of faulting two of the image's pages in, not all of them.
func selfCopyCheck(fd int, img []byte) error {
	n := min(selfCopyPage, len(img))
	buf := make([]byte, n)
	for _, off := range []int{0, len(img) - n} {
		if err := preadFull(fd, buf, int64(off)); err != nil {
			return fmt.Errorf("pread memfd at %d: %w", off, err)
		}
		if !bytes.Equal(buf, img[off:off+n]) {
			return fmt.Errorf("the memfd's %d bytes at %d are not the image's (sendfile from /proc/self/exe at a wrong offset)", n, off)
		}
	}
	return nil
}

func preadFull(fd int, b []byte, off int64) error {
	for done := 0; done < len(b); {
		n, err := unix.Pread(fd, b[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("end of file at %d of %d bytes", done, len(b))
		}
		done += n
	}
	return nil
}
