package profiles

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestDescriptionsMatchLimits: a built-in profile's description that
// names its memory or its time says the profile's values (issue 19,
// point 17: data said 10 minutes with a wall_time of 900 s).
func TestDescriptionsMatchLimits(t *testing.T) {
	minutes := regexp.MustCompile(`(\d+) minutes`)
	for _, name := range Names() {
		p, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := minutes.FindStringSubmatch(p.Description); m != nil {
			n, _ := strconv.Atoi(m[1])
			if got := time.Duration(p.Limits.WallTime); got != time.Duration(n)*time.Minute {
				t.Errorf("%s: description %q, wall_time %v", name, p.Description, got)
			}
		}
		if m := regexp.MustCompile(`(\d+G) memory`).FindStringSubmatch(p.Description); m != nil && p.Limits.Memory.String() != m[1] {
			t.Errorf("%s: description %q, memory %v", name, p.Description, p.Limits.Memory)
		}
	}
}
