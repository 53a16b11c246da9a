package nsjail

import (
	"strings"
	"testing"
)

func TestTimelinePrintsInTimeOrder(t *testing.T) {
	tl := timeline{marks: []Mark{{"a", 0}, {"c", 3e6}, {"b", 2e6}}}
	tl.on.Store(true)
	var b strings.Builder
	tl.print(&b)
	if got := b.String(); strings.Index(got, " b\n") > strings.Index(got, " c\n") || strings.Contains(got, "-") {
		t.Fatalf("timeline out of order:\n%s", got)
	}
}
