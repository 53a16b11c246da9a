package serve

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestNodeName(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{in: "sbx-1"}, {in: "node.example.com"}, {in: "sbx-pool-7d9f8-x2x"},
		{in: "-a", err: "--node-name"}, {in: "a b", err: "--node-name"}, {in: "a/b", err: "--node-name"},
		{in: strings.Repeat("a", 64), err: "--node-name"},
	} {
		got, err := NodeName(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NodeName(%q) = %q, %v; want an error", tc.in, got, err)
			}
		} else if err != nil || got != tc.in {
			t.Errorf("NodeName(%q) = %q, %v", tc.in, got, err)
		}
	}
	h, _ := os.Hostname()
	if got, err := NodeName(""); err != nil || got == "" || (nodeNameRE().MatchString(h) && got != h) {
		t.Errorf("NodeName(\"\") = %q, %v; hostname %q", got, err, h)
	}
}

func TestNodeHeaderOnEveryResponse(t *testing.T) {
	h := withNode("sbx-2", http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/nothing", nil))
	if rec.Code != 404 || rec.Header().Get(NodeHeader) != "sbx-2" {
		t.Errorf("%d %v", rec.Code, rec.Header())
	}
}
