package nsjail

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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
		{Kind: ctlConfine, Confine: &Confine{Seccomp: &seccomp.Filter{Policy: seccomp.Guard, BPF: testProgram(2), Fallback: testProgram(1)}, Rlimits: []Rlimit{{Resource: "RLIMIT_CPU", Soft: 1, Hard: 2}}}},
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
		// The Confine's programs' frame (wire.go).
		{"program inside the line", `{"kind":"confine","confine":{"seccomp":{"policy":"guard","bpf":"AAAAAAAAAAA=","notify":false},"bpf_bytes":8}}` + "\n" + string(testProgram(1)), ctlConfine, "a program inside the line", nil},
		{"program of no whole instructions", confineWire(12, 0, 12), ctlConfine, "program of 12 bytes", nil},
		{"program past BPF_MAXINSNS", confineWire(maxProgramBytes+8, 0, maxProgramBytes+8), ctlConfine, "program of 32776 bytes", nil},
		{"fallback past BPF_MAXINSNS", confineWire(8, maxProgramBytes+8, 8), ctlConfine, "fallback program of 32776 bytes", nil},
		{"negative size", confineWire(-8, 0, 0), ctlConfine, "program of -8 bytes", nil},
		{"no program", confineWire(0, 0, 0), ctlConfine, "program of 0 bytes", nil},
		{"programs without a filter", `{"kind":"confine","confine":{"seccomp":null,"bpf_bytes":8}}` + "\n" + string(testProgram(1)), ctlConfine, "without a filter", nil},
		{"frame cut short", confineWire(16, 8, 16), ctlConfine, "programs", io.ErrUnexpectedEOF},
		{"no frame", confineWire(16, 0, 0), ctlConfine, "programs", io.ErrUnexpectedEOF},
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

// testProgram is n 8-byte instructions (what they do is not read here).
func testProgram(n int) []byte {
	b := make([]byte, 8*n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// confineWire is a Confine's line that gives its programs as bpf and
// fallback bytes, followed by frame bytes of them.
func confineWire(bpf, fallback, frame int) string {
	return fmt.Sprintf(`{"kind":"confine","confine":{"seccomp":{"policy":"guard","bpf":null,"notify":false},"bpf_bytes":%d,"fallback_bytes":%d}}`, bpf, fallback) + "\n" + strings.Repeat("\x06", max(frame, 0))
}

// TestConfineProgramsCrossRaw: the filter's programs follow the Confine's
// line byte for byte, never inside it: the line of the allowlist policy
// (21.5 KB of programs, which crossed in base64) is a few hundred bytes,
// and what expect hands on loads the same programs.
func TestConfineProgramsCrossRaw(t *testing.T) {
	p, err := seccomp.ForRun("allowlist")
	if err != nil {
		t.Fatal(err)
	}
	f, err := seccomp.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	wire := ctlLine(t, ctlMsg{Kind: ctlConfine, Confine: &Confine{Seccomp: f}})
	line, frame, _ := strings.Cut(wire, "\n")
	if frame != string(f.BPF)+string(f.Fallback) {
		t.Fatalf("after the line: %d bytes, want the %d+%d bytes of the programs", len(frame), len(f.BPF), len(f.Fallback))
	}
	if len(line) >= len(f.BPF)/4 {
		t.Fatalf("the line is %d bytes for programs of %d+%d: do they cross inside it? %.200s", len(line), len(f.BPF), len(f.Fallback), line)
	}
	got, err := expect(bufio.NewReader(strings.NewReader(wire+"next")), ctlConfine)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Confine.Seccomp.BPF) != string(f.BPF) || string(got.Confine.Seccomp.Fallback) != string(f.Fallback) {
		t.Fatal("expect handed on other programs than were sent")
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
		{"a program of no whole instructions", ctlMsg{Kind: ctlConfine, Confine: &Confine{Seccomp: &seccomp.Filter{Policy: seccomp.Guard, BPF: []byte{1, 2, 3}}}}, "program of 3 bytes"},
		{"a program past BPF_MAXINSNS", ctlMsg{Kind: ctlConfine, Confine: &Confine{Seccomp: &seccomp.Filter{Policy: seccomp.Guard, BPF: testProgram(4097)}}}, "program of 32776 bytes"},
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
		`{"kind":"confine","confine":{"seccomp":{"policy":"guard","bpf":null,"notify":false},"bpf_bytes":8}}`,
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
		if len(line) <= maxCtlFrame[m.Kind] && m.Kind != ctlConfine {
			if _, err := encodeCtl(m); err != nil {
				t.Fatalf("accepted %q, which does not encode again: %v", line, err)
			}
		}
	})
}

// FuzzExpectConfine feeds arbitrary bytes to the init's read of the
// Confine, its line and its programs' frame: it must never panic or read
// past the frame the line announced, and what it accepts has programs
// within BPF_MAXINSNS of whole instructions, which encode again to a
// line and frame that read back the same.
//
//	go test -run '^$' -fuzz '^FuzzExpectConfine$' -fuzztime 60s ./nsjail/
func FuzzExpectConfine(f *testing.F) {
	for _, seed := range []string{
		confineWire(16, 8, 24) + "rest",
		confineWire(8, 0, 8),
		confineWire(16, 0, 8),
		confineWire(12, 0, 12),
		`{"kind":"confine","confine":{"seccomp":null}}` + "\n",
		`{"kind":"confine","confine":{"seccomp":{"policy":"guard","bpf":"AAAAAAAAAAA=","notify":false},"bpf_bytes":8}}` + "\n" + string(testProgram(1)),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		r := bytes.NewReader(wire)
		br := bufio.NewReaderSize(r, 64<<10)
		m, err := expect(br, ctlConfine)
		if err != nil {
			return
		}
		c := m.Confine
		if c.Seccomp != nil {
			if n := len(c.Seccomp.BPF); n != c.BPFBytes || n == 0 || n%8 != 0 || n > maxProgramBytes {
				t.Fatalf("accepted a filter program of %d bytes (line says %d)", n, c.BPFBytes)
			}
			if n := len(c.Seccomp.Fallback); n != c.FallbackBytes || n%8 != 0 || n > maxProgramBytes {
				t.Fatalf("accepted a fallback program of %d bytes (line says %d)", n, c.FallbackBytes)
			}
		}
		line, _, _ := bytes.Cut(wire, []byte("\n"))
		consumed := len(wire) - r.Len() - br.Buffered()
		if want := len(line) + 1 + c.BPFBytes + c.FallbackBytes; consumed != want {
			t.Fatalf("read %d bytes, want the line and its frame: %d", consumed, want)
		}
		again, err := encodeCtl(m)
		if err != nil {
			t.Fatalf("accepted %q, which does not encode again: %v", wire, err)
		}
		m2, err := expect(bufio.NewReader(bytes.NewReader(again)), ctlConfine)
		if err != nil || ctlLine(t, m2) != string(again) {
			t.Fatalf("re-encoded %q reads back as %+v, %v", again, m2, err)
		}
	})
}
