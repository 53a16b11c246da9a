//go:build cgo && !sbx_init_only && linux

package nsjail

/*
#include <malloc.h>

// sbx_malloc_one_arena keeps glibc's malloc to its main arena. By default
// each thread that first calls malloc while another holds the main
// arena's lock gets an arena of its own (up to 8 per CPU, mallopt(3)
// M_ARENA_MAX), and a new arena is a 128 MB PROT_NONE reservation
// trimmed to 64 MB-aligned with munmap, an mprotect and its first page's
// fault (glibc malloc/arena.c new_heap). sbx's C side mallocs in only a
// few places (cgo's thread start, libseccomp), none of them hot, yet an
// `sbx exec` made 5 arenas per run: each munmap of a multi-threaded
// process is a TLB shootdown across its threads, which a VM pays for
// dearly (issue 13). One arena costs them nothing: there is no
// contention to spread.
__attribute__((constructor)) static void sbx_malloc_one_arena(void) {
	mallopt(M_ARENA_MAX, 1);
}
*/
import "C"
