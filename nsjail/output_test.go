package nsjail

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	cases := []struct {
		name      string
		limit     int64
		writes    []string
		want      string
		truncated bool
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly the limit", 6, []string{"abc", "def"}, "abcdef", false},
		{"head and tail kept", 6, []string{"abcdefghij"}, "abc" + elisionMarker(4) + "hij", true},
		{"tail wraps over many writes", 4, []string{"ab", "cd", "ef", "gh", "ij"}, "ab" + elisionMarker(6) + "ij", true},
		{"one huge write", 4, []string{strings.Repeat("x", 100) + "yz"}, "xx" + elisionMarker(98) + "yz", true},
		{"zero limit", 0, []string{"abc"}, elisionMarker(3), true},
		{"odd limit", 5, []string{"0123456789"}, "01" + elisionMarker(5) + "789", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var live bytes.Buffer
			c := newCapture(tc.limit, &live)
			var total int
			for _, w := range tc.writes {
				n, err := c.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				total += len(w)
			}
			if got := string(c.Bytes()); got != tc.want {
				t.Errorf("Bytes() = %q, want %q", got, tc.want)
			}
			if c.Truncated() != tc.truncated || c.Total() != int64(total) {
				t.Errorf("Truncated() = %v, Total() = %d; want %v, %d", c.Truncated(), c.Total(), tc.truncated, total)
			}
			c.Finish()
			// Live output ends the way the stream did, and never shows
			// more than the stream had.
			all := strings.Join(tc.writes, "")
			if !tc.truncated && live.String() != all || tc.truncated && tc.limit > 0 && !strings.HasSuffix(live.String(), all[len(all)-1:]) {
				t.Errorf("live copy %q of %q", live.String(), all)
			}
		})
	}
}

func TestCaptureInvalidUTF8(t *testing.T) {
	c := newCapture(100, nil)
	c.Write([]byte("ok \xff\xfe end"))
	if got := c.String(); got != "ok \uFFFD end" {
		t.Fatalf("String() = %q", got)
	}
}

func TestCaptureLiveIsCappedToo(t *testing.T) {
	cases := []struct {
		limit  int64
		writes []string
		live   string
	}{
		{10, []string{"abc"}, "abc"},
		{10, []string{"0123456789", "ABCDEFGHIJ"}, "0123456789" + elisionMarker(5) + "FGHIJ"},
		{10, []string{"012345678", "9A"}, "012345678" + "9A"}, // all shown live but 2 bytes: the tail adds the missing ones only
		{10, []string{strings.Repeat("x", 100)}, "xxxxx" + elisionMarker(90) + "xxxxx"},
	}
	for _, tc := range cases {
		var live bytes.Buffer
		c := newCapture(tc.limit, &live)
		for _, w := range tc.writes {
			c.Write([]byte(w))
		}
		c.Finish()
		if live.String() != tc.live {
			t.Errorf("limit %d writes %q: live %q, want %q", tc.limit, tc.writes, live.String(), tc.live)
		}
	}
}

// String is Bytes as valid UTF-8, whatever was written: every limit from
// 0 to 40 and writes of random lengths and bytes (a third of them invalid
// UTF-8), before and after the tail wraps (issue 13: String builds the
// string itself instead of converting Bytes).
func TestCaptureStringIsBytes(t *testing.T) {
	rnd := rand.New(rand.NewSource(13))
	alphabet := []byte("ab\xff\xfe\xe4\xb8\xadé\n")
	for limit := int64(0); limit <= 40; limit++ {
		for trial := 0; trial < 20; trial++ {
			c := newCapture(limit, nil)
			for w := rnd.Intn(12); w > 0; w-- {
				p := make([]byte, rnd.Intn(30))
				for i := range p {
					p[i] = alphabet[rnd.Intn(len(alphabet))]
				}
				c.Write(p)
				if got, want := c.String(), strings.ToValidUTF8(string(c.Bytes()), "\uFFFD"); got != want {
					t.Fatalf("limit %d: String() = %q, want %q (Bytes as valid UTF-8)", limit, got, want)
				}
			}
		}
	}
}
