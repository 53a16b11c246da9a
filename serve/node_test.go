package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
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

// TestSessionIDNamesItsNode: a session id is NODE-HEX and parses back to
// NODE whatever '-' the node name holds; what is not of the form names
// no node.
func TestSessionIDNamesItsNode(t *testing.T) {
	if len(newID()) != sessionHexLen {
		t.Fatalf("newID has %d characters, sessionHexLen says %d", len(newID()), sessionHexLen)
	}
	for _, node := range []string{"sbx-1", "sbx-1-2", "a", "node.example.com", "sbx-pool-7d9f8-x2x", strings.Repeat("n", 63)} {
		id := sessionID(node)
		if got, ok := sessionNode(id); !ok || got != node {
			t.Errorf("sessionNode(%q) = %q, %v; want %q", id, got, ok, node)
		}
	}
	hex := strings.Repeat("0a", 12)
	for _, id := range []string{"", "x", hex, "-" + hex, "sbx-1-" + strings.ToUpper(hex), "sbx-1-" + hex[1:], "sbx-1-" + hex + "0",
		"sbx 1-" + hex, "-sbx-" + hex, "sbx-1_" + hex, "../" + hex} {
		if got, ok := sessionNode(id); ok {
			t.Errorf("sessionNode(%q) = %q, ok; want no node", id, got)
		}
	}
	if _, err := NodeName("supervisor-1"); err == nil {
		t.Errorf("NodeName(supervisor-1) accepted: its sessions' cgroups would be named as sbx's own leaf")
	}
}

// TestMisdirectedSession: a request to node sbx-1 for a session whose id
// names sbx-2 answers 421 with a JSON error naming both and the route
// header naming sbx-2, on every session route; an id of this node that
// it does not hold, or an id of no node, stays 404.
func TestMisdirectedSession(t *testing.T) {
	s, err := New(Config{Profiles: []string{"standard"}, NodeName: "sbx-1"})
	if err != nil {
		t.Fatal(err)
	}
	hex := strings.Repeat("0a", 12)
	if id := sessionID(s.NodeName()); !strings.HasPrefix(id, "sbx-1-") {
		t.Errorf("a session id of node sbx-1: %q", id)
	}
	for _, route := range []struct{ method, suffix string }{{"GET", ""}, {"DELETE", ""}, {"POST", "/exec"}, {"POST", "/interrupt"},
		{"POST", "/restart"}, {"POST", "/snapshot"}, {"GET", "/files"}, {"PUT", "/files?path=a"}, {"DELETE", "/files?path=a"}} {
		for _, tc := range []struct {
			id, route string
			status    int
		}{
			{"sbx-2-" + hex, "sbx-2", http.StatusMisdirectedRequest},
			{"sbx-1-2-" + hex, "sbx-1-2", http.StatusMisdirectedRequest},
			{"sbx-1-" + hex, "sbx-1", http.StatusNotFound},
			{"x", "sbx-1", http.StatusNotFound},
		} {
			rec := httptest.NewRecorder()
			s.http.Handler.ServeHTTP(rec, httptest.NewRequest(route.method, "/v1/sessions/"+tc.id+route.suffix, strings.NewReader(`{"code":"1"}`)))
			what := route.method + " " + tc.id + route.suffix
			if rec.Code != tc.status || rec.Header().Get(SessionRouteHeader) != tc.route || rec.Header().Get(NodeHeader) != "sbx-1" {
				t.Errorf("%s: %d %v, want %d with route %s", what, rec.Code, rec.Header(), tc.status, tc.route)
				continue
			}
			var e MisdirectedError
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				t.Errorf("%s: the body is not an error: %v", what, err)
				continue
			}
			if tc.status == http.StatusMisdirectedRequest {
				if e.Error.Code != "misdirected" || e.Error.Node != tc.route || e.Error.ThisNode != "sbx-1" ||
					!strings.Contains(e.Error.Message, "node "+tc.route+",") || !strings.Contains(e.Error.Message, "this node sbx-1") {
					t.Errorf("%s: %+v", what, e.Error)
				}
			} else if e.Error.Code != "no_session" || e.Error.Node != "" || !strings.Contains(e.Error.Message, "on node sbx-1") {
				t.Errorf("%s: %+v", what, e.Error)
			}
		}
	}
}

// TestWriteJSONSendsContentLength: a response leaves whole, with its
// length, so that a body cut by a server killed mid-write is a short
// read for the client, never a shorter document that parses.
func TestWriteJSONSendsContentLength(t *testing.T) {
	big := strings.Repeat("x", 10000) // past net/http's 2 KB chunking buffer
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, map[string]string{"stdout": big, "html": "<b>"})
	body := rec.Body.String()
	if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q for a %d-byte body", got, len(body))
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["stdout"] != big || !strings.Contains(body, `"<b>"`) {
		t.Errorf("body does not decode to what was sent, unescaped: %v", err)
	}
	rec = httptest.NewRecorder()
	writeJSON(rec, 200, map[string]any{"bad": func() {}})
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"internal"`) || rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Errorf("an unencodable value: %d %q", rec.Code, rec.Body.String())
	}
}
