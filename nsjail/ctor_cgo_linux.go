//go:build cgo && !sbx_init_only && linux

package nsjail

/*
#include <stdint.h>
#include <time.h>

// sbx_ctor_ns is when this process's C constructors ran, on
// CLOCK_MONOTONIC (the clock of --debug-timings): after the static
// glibc's start, its CPUID probe of the caches included, and before Go's
// runtime starts, which runs its package inits and then main. 0 if the
// clock failed.
int64_t sbx_ctor_ns;

__attribute__((constructor)) static void sbx_ctor_clock(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
		sbx_ctor_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
*/
import "C"

// ConstructorNS is when the C constructors of this process ran, on the
// clock of MonotonicNS: the earliest moment a static cgo binary can
// record, before Go's runtime and the package inits (0 without one).
// --debug-timings shows the stretch from there to main, where it used to
// start its timeline and so left out what happened before it.
func ConstructorNS() int64 { return int64(C.sbx_ctor_ns) }
