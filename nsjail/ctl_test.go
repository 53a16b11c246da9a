package nsjail

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/seccomp"
)

// ctlLine encodes m for the tests, failing them if it cannot.
func ctlLine(t *testing.T, m ctlMsg) string {
	t.Helper()
	b, err := encodeCtl(m)
	if err != nil {
		t.Fatalf("encodeCtl(%s): %v", m.Kind, err)
	}
	return string(b)
}

// TestCtlRoundTrip sends one message of each kind through the codec in
// the order the supervisor writes them, and reads them back with expect.
func TestCtlRoundTrip(t *testing.T) {
	spec := validSpec()
	msgs := []ctlMsg{
		{Kind: ctlSpec, Spec: &spec},
		{Kind: ctlConfine, Confine: &Confine{Seccomp: &seccomp.Filter{Policy: seccomp.Guard, BPF: []byte{1, 2, 3}}, Rlimits: []Rlimit{{Resource: "RLIMIT_CPU", Soft: 1, Hard: 2}}}},
		{Kind: ctlPayload, Payload: &Payload{Argv: []string{"python3", "-c", "print(1)"}, Files: []File{{Path: "a.txt", Mode: 0o644, Size: 3}}, Env: []string{"A=1"}}},
		{Kind: ctlControl, Control: &Control{Signal: 15}},
		{Kind: ctlControl, Control: &Control{Kill: true}},
	}
	var wire strings.Builder
	for _, m := range msgs {
		wire.WriteString(ctlLine(t, m))
	}
	br := bufio.NewReader(strings.NewReader(wire.String()))
	for _, want := range msgs {
		got, err := expect(br, want.Kind)
		if err != nil {
			t.Fatalf("expect(%s): %v", want.Kind, err)
		}
		if ctlLine(t, got) != ctlLine(t, want) {
			t.Errorf("%s: got %s, want %s", want.Kind, ctlLine(t, got), ctlLine(t, want))
		}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("bytes left after the last message: %q", rest)
	}
}

// TestCtlRefused lists what expect must refuse: each is an error that
// names what was wrong, never a message handed on.
func TestCtlRefused(t *testing.T) {
	spec := validSpec()
	specLine := ctlLine(t, ctlMsg{Kind: ctlSpec, Spec: &spec})
	for _, tc := range []struct {
		name, wire string
		kind       ctlKind
		want       string
		is         error
	}{
		{"wrong kind", `{"kind":"control","control":{"kill":true}}` + "\n", ctlPayload, "a control message where a payload message belongs", nil},
		{"spec where confine belongs", specLine, ctlConfine, "a spec message where a confine message belongs", nil},
		{"unknown kind", `{"kind":"exec","control":{}}` + "\n", ctlControl, `unknown kind "exec"`, nil},
		{"unknown field", `{"kind":"control","control":{"kill":true},"extra":1}` + "\n", ctlControl, `unknown field "extra"`, nil},
		{"unknown nested field", `{"kind":"control","control":{"kill":true,"pid":1}}` + "\n", ctlControl, `unknown field "pid"`, nil},
		{"unknown field in the Spec", strings.Replace(specLine, `"version":`, `"uid_map":"0 0 1","version":`, 1), ctlSpec, `unknown field "uid_map"`, nil},
		{"kind without its body", `{"kind":"payload"}` + "\n", ctlPayload, "payload message without its payload", nil},
		{"two bodies", `{"kind":"control","control":{"kill":true},"payload":{"argv":["x"],"files":[]}}` + "\n", ctlControl, "control message with a payload in it", nil},
		{"data after the object", `{"kind":"control","control":{}} {}` + "\n", ctlControl, "data after the object", nil},
		{"not JSON", "\x00\xff\n", ctlControl, "bad message", nil},
		{"truncated", specLine[:len(specLine)/2], ctlSpec, "", io.ErrUnexpectedEOF},
		{"empty pipe", "", ctlSpec, "", io.EOF},
		{"frame too big", `{"kind":"control","control":{"signal":1` + strings.Repeat(" ", maxCtlFrame[ctlControl]) + "}}\n", ctlControl, "", errFrameTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := expect(bufio.NewReaderSize(strings.NewReader(tc.wire), 16), tc.kind)
			if err == nil {
				t.Fatalf("accepted %+v", m)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), string(tc.kind)) {
				t.Errorf("error %q, want it to say %q and name %s", err, tc.want, tc.kind)
			}
		})
	}
}

// TestEncodeCtlRefused: the supervisor never writes what the init would
// refuse, so the error is the host's and says why.
func TestEncodeCtlRefused(t *testing.T) {
	huge := &Payload{Argv: []string{"python3", "-c", strings.Repeat("x", maxCtlFrame[ctlPayload])}}
	for _, tc := range []struct {
		name string
		m    ctlMsg
		want string
	}{
		{"over the frame", ctlMsg{Kind: ctlPayload, Payload: huge}, "more than the control pipe's"},
		{"no body", ctlMsg{Kind: ctlSpec}, "spec message without its spec"},
		{"other body", ctlMsg{Kind: ctlControl, Control: &Control{}, Payload: huge}, "control message with a payload in it"},
		{"unknown kind", ctlMsg{Kind: "exec"}, "unknown kind"},
	} {
		if _, err := encodeCtl(tc.m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeCtl feeds arbitrary lines to the control pipe's decoder: it
// must never panic, and what it accepts is a well-formed union that
// encodes again within its kind's frame.
//
//	go test -run '^$' -fuzz '^FuzzDecodeCtl$' -fuzztime 60s ./nsjail/
func FuzzDecodeCtl(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"control","control":{"kill":true}}`,
		`{"kind":"control","control":{"signal":15}}`,
		`{"kind":"payload","payload":{"argv":["python3"],"files":[{"path":"a","mode":420,"size":1}]}}`,
		`{"kind":"confine","confine":{"seccomp":null}}`,
		`{"kind":"spec","spec":{"version":3}}`,
		`{"kind":"control","payload":{"argv":[]}}`,
		`{"kind":"nope"}`,
		"\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decodeCtl(line)
		if err != nil {
			return
		}
		if err := m.check(); err != nil {
			t.Fatalf("accepted a malformed union: %v", err)
		}
		if len(line) <= maxCtlFrame[m.Kind] {
			if _, err := encodeCtl(m); err != nil {
				t.Fatalf("accepted %q, which does not encode again: %v", line, err)
			}
		}
	})
}
