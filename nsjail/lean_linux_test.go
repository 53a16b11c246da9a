package nsjail

import (
	"slices"
	"testing"
)

// TestInitEnviron: the init's environment is initEnv, plus SBX_HUGE_HEAP=1
// only for a run that asks for it (a one-shot `sbx exec`, never a warm
// pool's init), and asking never changes initEnv itself.
func TestInitEnviron(t *testing.T) {
	before := slices.Clone(initEnv)
	huge := (&supervisor{job: &Job{HugeHeapInit: true}}).initEnviron()
	if want := append(slices.Clone(before), "SBX_HUGE_HEAP=1"); !slices.Equal(huge, want) {
		t.Errorf("with HugeHeapInit: %q, want %q", huge, want)
	}
	if got := (&supervisor{job: &Job{}}).initEnviron(); !slices.Equal(got, before) {
		t.Errorf("without: %q, want %q", got, before)
	}
	if !slices.Equal(initEnv, before) || !slices.Contains(initEnv, "GOMAXPROCS=2") {
		t.Errorf("initEnv is now %q, was %q", initEnv, before)
	}
}
