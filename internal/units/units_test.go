package units

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "512": 512, "1K": 1024, "1k": 1024, "256M": 256 << 20, "1.5G": 3 << 29,
		"64KiB": 64 << 10, "2MB": 2 << 20, "1T": 1 << 40, " 3M ": 3 << 20, "10B": 10,
		"0.5K": 512, "1 G": 1 << 30,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]error{
		"": ErrNotSize, "M": ErrNotSize, "1X": ErrNotSize, "abc": ErrNotSize, "12Q": ErrNotSize,
		"1e400": ErrNotSize, "NaN": ErrNotSize, "Inf": ErrNotSize,
		"-1M": ErrNegative, "-1": ErrNegative,
		"9000000T": ErrTooLarge,
	}
	for in, want := range bad {
		if _, err := ParseSize(in); !errors.Is(err, want) {
			t.Errorf("ParseSize(%q) error = %v, want %v", in, err, want)
		}
	}
}

// TestParseSizeExactTo2To53: every size up to MaxSize reads back exactly
// what FormatSize printed, with or without a unit (through a float64,
// FuzzLoad found 100000000000000001 read back as ...000000); past it a
// size is refused, so that no limit the Result reports as a JSON number
// (a double to most readers) can show rounded.
func TestParseSizeExactTo2To53(t *testing.T) {
	for _, n := range []int64{MaxSize, MaxSize - 1, 1<<53 - 3, 8191<<40 + 1<<30 + 1} {
		if float64(n) != float64(n-1)+1 && n > 1 {
			t.Fatalf("%d is not exact in a float64: the test is wrong", n)
		}
		for _, s := range []string{FormatSize(n), " " + FormatSize(n) + " "} {
			if got, err := ParseSize(s); err != nil || got != n {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, n)
			}
		}
	}
	for in, want := range map[string]int64{"8192T": MaxSize, "8191.5T": 8191<<40 + 1<<39, "8796093022208K": MaxSize} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"9007199254740993", "100000000000000001", "9223372036854775807", "8193T", "8192.0001T", "8796093022209K", "9223372036854775808", "9007199254740993T"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrTooLarge) {
			t.Errorf("ParseSize(%q) error = %v, want too large", in, err)
		}
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{
		1 << 30: "1 GiB", 3 << 29: "1.5 GiB", 128 << 20: "128 MiB", 1 << 20: "1 MiB",
		512: "512 bytes", 1: "1 byte", 0: "0 bytes", 1000000: "976.6 KiB (1000000 bytes)",
	} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 100: "100", 1024: "1K", 256 << 20: "256M", 3 << 29: "1.5G", 1025: "1025",
		1 << 40: "1T", 1536: "1.5K",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("round trip of %d gave %d, %v", n, back, err)
		}
	}
}

// FormatSize must not overflow on huge values (n*10 would).
func TestFormatSizeHuge(t *testing.T) {
	if got := FormatSize(math.MaxInt64); got != "9223372036854775807" {
		t.Errorf("FormatSize(MaxInt64) = %q", got)
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"1.5s": 1500 * time.Millisecond, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute,
		"10": 10 * time.Second, "0.5": 500 * time.Millisecond, "1h30m": 90 * time.Minute, " 3s ": 3 * time.Second,
	}
	for in, want := range good {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]error{
		"": ErrNotDuration, "soon": ErrNotDuration, "1x": ErrNotDuration, "NaN": ErrNotDuration,
		"-1s": ErrNegative, "-3": ErrNegative,
		"1e300": ErrTooLarge,
	}
	for in, want := range bad {
		if _, err := ParseDuration(in); !errors.Is(err, want) {
			t.Errorf("ParseDuration(%q) error = %v, want %v", in, err, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 10 * time.Second: "10s", 120 * time.Second: "120s", 500 * time.Millisecond: "500ms",
		1500 * time.Millisecond: "1.5s", 90 * time.Minute: "5400s", 1500 * time.Microsecond: "1.5ms",
		2*time.Second + 5*time.Millisecond: "2.005s",
	} {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := ParseDuration(got); err != nil || back != d {
			t.Errorf("round trip of %v gave %v, %v", d, back, err)
		}
	}
}

func TestSeconds(t *testing.T) {
	if d, err := Seconds(1.5); err != nil || d != 1500*time.Millisecond {
		t.Errorf("Seconds(1.5) = %v, %v", d, err)
	}
	for v, want := range map[float64]error{-1: ErrNegative, math.Inf(1): ErrNotDuration, 1e12: ErrTooLarge} {
		if _, err := Seconds(v); !errors.Is(err, want) {
			t.Errorf("Seconds(%v) error = %v, want %v", v, err, want)
		}
	}
}

func TestTextRoundTrip(t *testing.T) {
	var s Size
	if err := s.UnmarshalText([]byte("1.5G")); err != nil || s != 3<<29 {
		t.Fatalf("Size.UnmarshalText = %v, %v", s, err)
	}
	if b, _ := s.MarshalText(); string(b) != "1.5G" {
		t.Errorf("Size.MarshalText = %q", b)
	}
	if err := s.UnmarshalText([]byte("12Q")); err == nil || s != 3<<29 {
		t.Errorf("a bad size was accepted or clobbered the value: %v, %v", s, err)
	}
	var d Duration
	if err := d.UnmarshalText([]byte("2m")); err != nil || time.Duration(d) != 2*time.Minute {
		t.Fatalf("Duration.UnmarshalText = %v, %v", d, err)
	}
	if b, _ := d.MarshalText(); string(b) != "120s" {
		t.Errorf("Duration.MarshalText = %q", b)
	}
}

func TestCheckSize(t *testing.T) {
	for n, want := range map[int64]error{0: nil, MaxSize: nil, -1: ErrNegative, MaxSize + 1: ErrTooLarge} {
		if err := CheckSize(n); err != want {
			t.Errorf("CheckSize(%d) = %v, want %v", n, err, want)
		}
	}
}
