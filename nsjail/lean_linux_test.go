package nsjail

import (
	"slices"
	"testing"
)

// TestInitEnviron: the init's environment is initEnv, plus SBX_HUGE_HEAP=1
// only for a run that asks for it (a one-shot `sbx exec`, never a warm
// pool's init) and whose memory limit leaves room, and asking never
// changes initEnv itself.
func TestInitEnviron(t *testing.T) {
	before := slices.Clone(initEnv)
	huge := (&supervisor{job: &Job{HugeHeapInit: true}}).initEnviron()
	if want := append(slices.Clone(before), "SBX_HUGE_HEAP=1"); !slices.Equal(huge, want) {
		t.Errorf("with HugeHeapInit: %q, want %q", huge, want)
	}
	if got := (&supervisor{job: &Job{}}).initEnviron(); !slices.Equal(got, before) {
		t.Errorf("without: %q, want %q", got, before)
	}
	// Under a small memory limit the init's huge page would be the
	// payload's headroom: none. At hugeHeapMinMemory and above, one.
	for mem, want := range map[int64]bool{8 << 20: false, hugeHeapMinMemory - 1: false, hugeHeapMinMemory: true, 256 << 20: true} {
		got := (&supervisor{job: &Job{HugeHeapInit: true, Limits: Limits{MemoryBytes: mem}}}).initEnviron()
		if slices.Contains(got, "SBX_HUGE_HEAP=1") != want {
			t.Errorf("with HugeHeapInit and a memory limit of %d bytes: %q, want SBX_HUGE_HEAP=1 %v", mem, got, want)
		}
	}
	if !slices.Equal(initEnv, before) || !slices.Contains(initEnv, "GOMAXPROCS=1") {
		t.Errorf("initEnv is now %q, was %q", initEnv, before)
	}
}
