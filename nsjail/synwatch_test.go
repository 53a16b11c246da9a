package nsjail

import (
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSYNWatchFilterAssembles holds the init's raw SYN-watch program
// (synWatchFilter, written as opcodes so that the init binary needs no
// golang.org/x/net) to the same program in x/net/bpf's readable form.
func TestSYNWatchFilterAssembles(t *testing.T) {
	readable := []bpf.Instruction{
		/* 0 */ bpf.LoadExtension{Num: bpf.ExtType},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.PACKET_HOST, SkipTrue: 11},
		/* 2 */ bpf.LoadAbsolute{Off: 9, Size: 1},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_TCP, SkipTrue: 9},
		/* 4 */ bpf.LoadAbsolute{Off: 6, Size: 2},
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 7},
		/* 6 */ bpf.LoadAbsolute{Off: 16, Size: 2},
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x7f01, SkipTrue: 5},
		/* 8 */ bpf.LoadMemShift{Off: 0},
		/* 9 */ bpf.LoadIndirect{Off: 13, Size: 1},
		/* 10 */ bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x12},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x02, SkipFalse: 1},
		/* 12 */ bpf.RetConstant{Val: 128},
		/* 13 */ bpf.RetConstant{Val: 0},
	}
	raw, err := bpf.Assemble(readable)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(synWatchFilter) {
		t.Fatalf("synWatchFilter has %d instructions, the assembled program %d", len(synWatchFilter), len(raw))
	}
	for i, r := range raw {
		want := unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
		if synWatchFilter[i] != want {
			t.Errorf("instruction %d: %+v, assembled %+v", i, synWatchFilter[i], want)
		}
	}
}
