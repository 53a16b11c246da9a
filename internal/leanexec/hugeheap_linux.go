package leanexec

import (
	"syscall"
	"unsafe"
)

// madvCollapse is MADV_COLLAPSE (Linux 6.1,
// include/uapi/asm-generic/mman-common.h), which the syscall package
// does not name.
const madvCollapse = 25

// hugePageBytes is a PMD-sized transparent huge page on amd64 and arm64
// with 4 KiB pages.
const hugePageBytes = 2 << 20

// heapMark is an object of this process's heap, allocated by the package
// init: its address is in the heap's first pages.
var heapMark *[16]byte

// adviseHugeHeap collapses the 2 MiB of heap the runtime has begun to use
// into one transparent huge page (madvise(2) MADV_COLLAPSE), best effort
// (HugeHeap says when): its pages touched so far are copied into the huge
// page, and the rest of it, where the run's allocations land next (the
// runtime allocates from the lowest free address), needs no fault at all.
//
// Only MADV_COLLAPSE, not MADV_HUGEPAGE over the whole heap: with the
// usual THP "defrag" setting (madvise), every fault in an advised range
// may stall in direct compaction while the kernel looks for a free huge
// page (golang/go#61718, why Go 1.21.4 stopped advising its heap);
// MADV_COLLAPSE does that search once, here, for one huge page. The rest
// of the heap stays in small pages (measured: advising it too saved ~40
// more faults per run for ~1.5 MB more of the supervisor's memory).
//
// Refused (EINVAL, ENOMEM, EAGAIN) where the kernel predates 6.1 or has
// no THP, the setting is "never", the range is not all mapped heap, or
// no huge page can be had; the process then runs in small pages as
// before, so the error is not looked at: nothing depends on the page
// size.
func adviseHugeHeap() {
	heapMark = new([16]byte)
	at := uintptr(unsafe.Pointer(heapMark))
	syscall.Syscall(syscall.SYS_MADVISE, at&^(hugePageBytes-1), hugePageBytes, madvCollapse)
}
