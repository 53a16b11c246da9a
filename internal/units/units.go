// Package units parses and prints the human units of profiles and flags:
// sizes such as 256M or 1.5G (powers of 1024) and durations such as
// 500ms, 1.5s or 2m.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var sizeSuffixes = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"B", 1}, {"b", 1},
}

// ParseSize reads "256M", "1.5G", "64KiB" or a plain byte count. Suffixes
// are binary (K = 1024), as for memory limits everywhere in Linux.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q: empty", s)
	}
	mult := 1.0
	for _, sf := range sizeSuffixes {
		if strings.HasSuffix(t, sf.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, sf.suffix)), sf.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (K, M, G, T), e.g. 256M", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q: must not be negative", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(math.Round(b)), nil
}

// FormatSize prints n in the largest binary unit that keeps it exact to
// one decimal, e.g. 268435456 as "256M".
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
		if n >= u.m && (n*10)%u.m == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.m), 'f', 1, 64) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration reads Go durations ("1.5s", "500ms", "2m", "1h30m") and a
// bare number of seconds ("10", "0.5").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(t, 64); err == nil {
		if v < 0 || math.IsNaN(v) || v > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("duration %q: out of range", s)
		}
		return time.Duration(v * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 500ms, 1.5s, 2m", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q: must not be negative", s)
	}
	return d, nil
}

// Size is a byte count that reads and writes as a human size in TOML and
// JSON ("256M"); a bare integer is bytes.
type Size int64

func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	*s = Size(v)
	return err
}

func (s Size) MarshalText() ([]byte, error) { return []byte(FormatSize(int64(s))), nil }
func (s Size) String() string               { return FormatSize(int64(s)) }

// Duration reads and writes as "1.5s", "500ms", "2m"; a bare number is
// seconds.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
func (d Duration) String() string               { return time.Duration(d).String() }
