package kernel

import "testing"

func TestAtLeast(t *testing.T) {
	ma, mi, ok := Release()
	if !ok || ma < 2 {
		t.Fatalf("Release() = %d.%d, %v: want this kernel's version", ma, mi, ok)
	}
	if !AtLeast(ma, mi) || !AtLeast(ma-1, 99) || !AtLeast(2, 6) {
		t.Errorf("AtLeast is false for this kernel's own %d.%d or an older release", ma, mi)
	}
	if AtLeast(ma, mi+1) || AtLeast(ma+1, 0) {
		t.Errorf("AtLeast is true for a release newer than this kernel's %d.%d", ma, mi)
	}
}
