package nsjail

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeStatus feeds arbitrary bytes to the status pipe's decoder, as
// a broken or hostile init would write them: it must never panic, accept
// only what is within its bounds, and fail anything else with a framing
// error (which ends the run). In CI for 20 s; longer by hand:
//
//	go test -run '^$' -fuzz '^FuzzDecodeStatus$' -fuzztime 60s ./nsjail/
func FuzzDecodeStatus(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"ready"}`,
		`{"kind":"started","pid":2,"marks":[{"name":"init: x","ns":1}]}`,
		`{"kind":"exit","wait_status":256,"user_us":1,"filtered":true,"denials":{"101":3},"denials_other":4,"denials_known":true}`,
		`{"kind":"error","step":"pivot_root","path":"/x","errno":1,"msg":"pivot_root: EPERM"}`,
		`{"kind":"warning","msg":"w"}`,
		`{"kind":"exit"} {"kind":"exit"}`,
		`{"kind":"nope"}`,
		"\x00\xff",
		`{"kind":"exit","denials":{"x":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decodeStatus(line)
		if err != nil {
			if !errors.Is(err, errStatusFraming) {
				t.Fatalf("error %v is not a framing error", err)
			}
			return
		}
		if len(line) > maxStatusLine || len(m.Denials) > maxDenialKinds || len(m.Marks) > maxStatusMarks || m.DenialsOther < 0 {
			t.Fatalf("accepted a line past the bounds: %d bytes, %d denial kinds, %d marks", len(line), len(m.Denials), len(m.Marks))
		}
		switch m.Kind {
		case kindError, kindReady, kindStarted, kindExit, kindWarning:
		default:
			t.Fatalf("accepted kind %q", m.Kind)
		}
		// What the decoder accepts, the reader accepts as one line.
		if !strings.Contains(string(line), "\n") {
			evs := make(chan statusEvent, 4)
			go readStatus(strings.NewReader(string(line)+"\n"), evs)
			ev, ok := <-evs
			if !ok || ev.err != nil || ev.msg.Kind != m.Kind {
				t.Fatalf("readStatus disagrees with decodeStatus: %+v %v", ev, ok)
			}
			for range evs {
			}
		}
	})
}
