package units

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "512": 512, "1K": 1024, "1k": 1024, "256M": 256 << 20, "1.5G": 3 << 29,
		"64KiB": 64 << 10, "2MB": 2 << 20, "1T": 1 << 40, " 3M ": 3 << 20, "10B": 10,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1M", "1X", "abc", "1e400", "NaN"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 100: "100", 1024: "1K", 256 << 20: "256M", 3 << 29: "1.5G", 1025: "1025"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("round trip of %d gave %d, %v", n, back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{"1.5s": 1500 * time.Millisecond, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute, "10": 10 * time.Second, "0.5": 500 * time.Millisecond}
	for in, want := range good {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-1s", "-3", "1x"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}
