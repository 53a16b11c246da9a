// Package units parses and prints the human units of profiles and flags:
// sizes such as 256M or 1.5G (powers of 1024) and durations such as
// 500ms, 1.5s or 2m.
//
// Parse errors say what is wrong without repeating the input, so that the
// caller can name the key or flag and the value once:
// `--memory "12Q": not a size (...)`.
package units

import (
	"errors"
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

// The reasons a value is refused; callers wrap them with the key or flag.
var (
	ErrNotSize     = errors.New(`not a size (want a byte count, or a number with a unit K, M, G or T, powers of 1024: "256M", "1.5G")`)
	ErrNotDuration = errors.New(`not a duration (want "500ms", "1.5s", "2m", or a number of seconds)`)
	ErrNegative    = errors.New("must not be negative")
	ErrTooLarge    = errors.New("too large (at most 8192T, 2^53 bytes)")
)

// MaxSize is the largest size ParseSize takes: 2^53 bytes (8 PiB), the
// largest range in which a float64 holds every whole number. The Result's
// limits carry their values as JSON numbers, which most readers decode
// into doubles (Go's float64, JavaScript's Number); past 2^53 a limit
// would show rounded, not the one sbx enforced. No host has that much
// memory or disk.
const MaxSize = 1 << 53

// CheckSize says whether a byte count given as a plain integer (a TOML
// integer) is a size ParseSize would take: not negative, at most MaxSize.
func CheckSize(n int64) error {
	switch {
	case n < 0:
		return ErrNegative
	case n > MaxSize:
		return ErrTooLarge
	}
	return nil
}

// ParseSize reads "256M", "1.5G", "64KiB" or a plain byte count. Suffixes
// are binary (K = 1024), as for memory limits everywhere in Linux.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, ErrNotSize
	}
	mult := 1.0
	for _, sf := range sizeSuffixes {
		if strings.HasSuffix(t, sf.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, sf.suffix)), sf.mult
			break
		}
	}
	// A whole number is read as one: through a float64, a byte count past
	// 2^53 ("100000000000000001") came back rounded, and a profile that
	// sbx printed read back as a different limit (found by FuzzLoad).
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		m := int64(mult)
		switch {
		case n < 0:
			return 0, ErrNegative
		case n > MaxSize/m:
			return 0, ErrTooLarge
		}
		return n * m, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, ErrNotSize
	}
	if v < 0 {
		return 0, ErrNegative
	}
	b := v * mult
	if b > MaxSize {
		return 0, ErrTooLarge
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
		// n*10 would overflow for n near MaxInt64; such a size is not
		// "one decimal exact" in any unit anyway.
		if n >= u.m && n <= math.MaxInt64/10 && (n*10)%u.m == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.m), 'f', 1, 64) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// HumanSize is n for a sentence, in the binary unit FormatSize picks:
// "1 GiB", "1.5 GiB", "128 MiB", "512 bytes". A size that no unit holds to
// one decimal keeps its byte count: "976.6 KiB (1000000 bytes)".
func HumanSize(n int64) string {
	s := FormatSize(n)
	if u := s[len(s)-1]; u < '0' || u > '9' {
		return s[:len(s)-1] + " " + string(u) + "iB"
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m {
			return fmt.Sprintf("%.1f %s (%d bytes)", float64(n)/float64(u.m), u.s, n)
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return s + " bytes"
}

// ParseDuration reads Go durations ("1.5s", "500ms", "2m", "1h30m") and a
// bare number of seconds ("10", "0.5").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(t, 64); err == nil {
		return Seconds(v)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		// time.ParseDuration says "invalid duration" for overflow too; a
		// duration past 292 years is not worth its own message.
		return 0, ErrNotDuration
	}
	if d < 0 {
		return 0, ErrNegative
	}
	return d, nil
}

// Seconds turns a number of seconds (a TOML integer or float, or a bare
// number on the command line) into a Duration.
func Seconds(v float64) (time.Duration, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, ErrNotDuration
	case v < 0:
		return 0, ErrNegative
	case v >= math.MaxInt64/float64(time.Second):
		return 0, ErrTooLarge
	}
	return time.Duration(math.Round(v * float64(time.Second))), nil
}

// FormatDuration prints d the way a person would write it in a profile:
// whole seconds as "120s" (never "2m0s", and never minutes, which read
// like milliseconds to some), below a second as "500ms", otherwise as a
// decimal number of seconds ("1.5s") when that is exact.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Second && d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Millisecond == 0:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}

// Size is a byte count that reads and writes as a human size ("256M").
type Size int64

func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

func (s Size) MarshalText() ([]byte, error) { return []byte(FormatSize(int64(s))), nil }
func (s Size) String() string               { return FormatSize(int64(s)) }

// Duration reads and writes as "1.5s", "500ms", "2m"; a bare number is
// seconds.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
func (d Duration) String() string               { return FormatDuration(time.Duration(d)) }
