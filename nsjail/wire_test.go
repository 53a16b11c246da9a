package nsjail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// collectStatus runs readStatus over r and returns its events, failing
// the test if it does not finish (the hang of issue 11, finding 2, was a
// reader that stopped while the writer went on).
func collectStatus(t *testing.T, r io.Reader) []statusEvent {
	t.Helper()
	ch := make(chan statusEvent, 4)
	go readStatus(r, ch)
	var evs []statusEvent
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatal("readStatus did not finish")
		}
	}
}

func TestReadStatus(t *testing.T) {
	exit := `{"kind":"exit","wait_status":256,"filtered":true,"denials":{"101":3},"denials_known":true}` + "\n"
	ready := `{"kind":"ready"}` + "\n"
	cases := []struct {
		name  string
		input string
		kinds []statusKind // the messages decoded, in order
		fatal string       // the framing error at the end, if any
	}{
		{"clean", ready + exit, []statusKind{kindReady, kindExit}, ""},
		{"empty", "", nil, ""},
		{"cut by EOF", ready + `{"kind":"ex`, []statusKind{kindReady}, ""},
		{"oversized line", ready + `{"kind":"exit","msg":"` + strings.Repeat("a", maxStatusLine) + `"}` + "\n" + exit, []statusKind{kindReady}, "longer than"},
		{"endless line", strings.Repeat("x", 3*maxStatusLine), nil, "longer than"},
		{"garbage", "\x00\xff garbage\n" + exit, nil, "bad message"},
		{"unknown field", `{"kind":"exit","extra":1}` + "\n", nil, "bad message"},
		{"unknown kind", `{"kind":"framing"}` + "\n", nil, "unknown kind"},
		{"two objects", `{"kind":"ready"}{"kind":"ready"}` + "\n", nil, "data after"},
		{"empty line", "\n", nil, "bad message"},
		{"too many denial kinds", denialsLine(maxDenialKinds+1) + exit, nil, "past its bounds"},
		{"negative other", `{"kind":"exit","denials_other":-1}` + "\n", nil, "past its bounds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := collectStatus(t, strings.NewReader(tc.input))
			var kinds []statusKind
			var fatal error
			for i, ev := range evs {
				if ev.err != nil {
					if i != len(evs)-1 {
						t.Fatalf("events after the framing error: %v", evs[i+1:])
					}
					fatal = ev.err
					break
				}
				kinds = append(kinds, ev.msg.Kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.kinds) {
				t.Errorf("kinds %v, want %v", kinds, tc.kinds)
			}
			switch {
			case tc.fatal == "" && fatal != nil:
				t.Errorf("framing error %v, want none", fatal)
			case tc.fatal != "" && (fatal == nil || !errors.Is(fatal, errStatusFraming) || !strings.Contains(fatal.Error(), tc.fatal)):
				t.Errorf("framing error %v, want one with %q", fatal, tc.fatal)
			}
		})
	}
}

func denialsLine(n int) string {
	var b strings.Builder
	b.WriteString(`{"kind":"exit","denials":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":1`, 1000000+i)
	}
	b.WriteString(`},"denials_known":true}` + "\n")
	return b.String()
}

// TestReadStatusDrainsAfterError: after a framing error the writer must
// not block (it is the init, and it would never exit).
func TestReadStatusDrainsAfterError(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(append([]byte("garbage\n"), bytes.Repeat([]byte("y"), 8<<20)...))
		w.Close()
		done <- err
	}()
	evs := collectStatus(t, r)
	if len(evs) != 1 || evs[0].err == nil {
		t.Fatalf("events %v, want one framing error", evs)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the writer is still blocked after the framing error")
	}
}

func TestDecodeStatusRoundTrip(t *testing.T) {
	in := StatusMsg{Kind: kindExit, WaitStatus: 9, UserUS: 5, Filtered: true, DenialsKnown: true,
		Denials: map[int]int{1: 2}, DenialsOther: 7, Marks: []Mark{{"init: x", 3}}}
	line, err := encodeLine(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeStatus(line)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Fatalf("got %+v, want %+v", out, in)
	}
}

func TestDenialCountsBounded(t *testing.T) {
	d := &denialServer{counts: map[int]int{}}
	for i := 0; i < 100000; i++ {
		d.count(1000000 + i)
	}
	d.count(1000000) // a number already known stays by name
	if len(d.counts) != maxDenialKinds || d.other != 100000-maxDenialKinds || d.counts[1000000] != 2 {
		t.Fatalf("%d kinds, other %d, first %d", len(d.counts), d.other, d.counts[1000000])
	}
	line, err := encodeLine(StatusMsg{Kind: kindExit, Denials: d.counts, DenialsOther: d.other, DenialsKnown: true, Filtered: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeStatus(line); err != nil {
		t.Fatalf("the init's largest exit message does not decode: %v", err)
	}
}

func TestReportBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name    string
		wallEnd time.Time
		want    time.Duration
	}{
		{"no wall limit", time.Time{}, reportTimeout},
		{"wall far ahead", now.Add(time.Hour), reportTimeout},
		{"wall ahead", now.Add(5 * time.Second), 5*time.Second + ReportGrace},
		{"wall just passed", now.Add(-2 * time.Second), ReportGrace - 2*time.Second},
		{"wall long passed", now.Add(-time.Hour), 0},
	}
	for _, tc := range cases {
		if got := reportBudget(now, tc.wallEnd); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if ReportGrace <= killGrace {
		t.Errorf("ReportGrace %v must exceed killGrace %v, or a timed-out run never reports", ReportGrace, killGrace)
	}
}
