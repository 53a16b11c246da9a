package install

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// This file runs a compiled seccomp program in user space, the way the
// kernel does (gVisor tests its filters the same way). Compile uses it to
// check invariants of what libseccomp generated; the tests use it to hold
// every policy to its reference meaning without loading anything.

// Data mirrors struct seccomp_data (linux/seccomp.h), the input of
// every seccomp program: 64 bytes, native byte order.
type Data struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

const seccompDataSize = 64

func (d *Data) word(off uint32) (uint32, error) {
	if off%4 != 0 || off+4 > seccompDataSize {
		return 0, fmt.Errorf("load of seccomp_data offset %d", off)
	}
	var b [seccompDataSize]byte
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(d.Nr))
	ne.PutUint32(b[4:], d.Arch)
	ne.PutUint64(b[8:], d.IP)
	for i, a := range d.Args {
		ne.PutUint64(b[16+8*i:], a)
	}
	return ne.Uint32(b[off:]), nil
}

// DecodeBPF splits struct sock_filter[] (native byte order) into
// instructions.
func DecodeBPF(prog []byte) ([]unix.SockFilter, error) {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, fmt.Errorf("seccomp program of %d bytes is not a list of 8-byte instructions", len(prog))
	}
	// BPF_MAXINSNS: the kernel refuses longer programs (seccomp(2), EINVAL).
	if len(prog)/8 > 4096 {
		return nil, fmt.Errorf("seccomp program has %d instructions, the kernel takes at most 4096", len(prog)/8)
	}
	ne := binary.NativeEndian
	insns := make([]unix.SockFilter, len(prog)/8)
	for i := range insns {
		b := prog[8*i:]
		insns[i] = unix.SockFilter{Code: ne.Uint16(b), Jt: b[2], Jf: b[3], K: ne.Uint32(b[4:])}
	}
	return insns, nil
}

var errNoReturn = errors.New("seccomp program runs off its end")

// RunBPF executes a classic BPF seccomp program on d and returns its
// SECCOMP_RET_* value. It accepts the instructions the kernel's
// seccomp_check_filter accepts and fails on anything else.
func RunBPF(insns []unix.SockFilter, d *Data) (uint32, error) {
	var a, x uint32
	var mem [16]uint32 // BPF_MEMWORDS
	for pc := 0; pc < len(insns); pc++ {
		in := insns[pc]
		k := in.K
		src := k
		if in.Code&0x08 == unix.BPF_X {
			src = x
		}
		switch in.Code & 0x07 {
		case unix.BPF_LD, unix.BPF_LDX:
			var v uint32
			switch in.Code & 0xe0 {
			case unix.BPF_ABS:
				if in.Code&0x18 != unix.BPF_W {
					return 0, fmt.Errorf("insn %d: load of size %#x", pc, in.Code&0x18)
				}
				w, err := d.word(k)
				if err != nil {
					return 0, fmt.Errorf("insn %d: %w", pc, err)
				}
				v = w
			case unix.BPF_IMM:
				v = k
			case unix.BPF_MEM:
				if k >= 16 {
					return 0, fmt.Errorf("insn %d: scratch word %d", pc, k)
				}
				v = mem[k]
			case unix.BPF_LEN:
				v = seccompDataSize
			default:
				return 0, fmt.Errorf("insn %d: load mode %#x", pc, in.Code&0xe0)
			}
			if in.Code&0x07 == unix.BPF_LD {
				a = v
			} else {
				x = v
			}
		case unix.BPF_ST, unix.BPF_STX:
			if k >= 16 {
				return 0, fmt.Errorf("insn %d: scratch word %d", pc, k)
			}
			if in.Code&0x07 == unix.BPF_ST {
				mem[k] = a
			} else {
				mem[k] = x
			}
		case unix.BPF_ALU:
			switch in.Code & 0xf0 {
			case unix.BPF_ADD:
				a += src
			case unix.BPF_SUB:
				a -= src
			case unix.BPF_MUL:
				a *= src
			case unix.BPF_DIV:
				if src == 0 {
					return 0, nil // the kernel's classic BPF returns 0: kill
				}
				a /= src
			case unix.BPF_MOD:
				if src == 0 {
					return 0, nil
				}
				a %= src
			case unix.BPF_AND:
				a &= src
			case unix.BPF_OR:
				a |= src
			case unix.BPF_XOR:
				a ^= src
			case unix.BPF_LSH:
				a <<= src & 31
			case unix.BPF_RSH:
				a >>= src & 31
			case unix.BPF_NEG:
				a = -a
			default:
				return 0, fmt.Errorf("insn %d: alu op %#x", pc, in.Code&0xf0)
			}
		case unix.BPF_JMP:
			var jump bool
			switch in.Code & 0xf0 {
			case unix.BPF_JA:
				pc += int(k)
				continue
			case unix.BPF_JEQ:
				jump = a == src
			case unix.BPF_JGT:
				jump = a > src
			case unix.BPF_JGE:
				jump = a >= src
			case unix.BPF_JSET:
				jump = a&src != 0
			default:
				return 0, fmt.Errorf("insn %d: jump op %#x", pc, in.Code&0xf0)
			}
			if jump {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET:
			switch in.Code & 0x18 {
			case unix.BPF_K:
				return k, nil
			case unix.BPF_A:
				return a, nil
			}
			return 0, fmt.Errorf("insn %d: return source %#x", pc, in.Code&0x18)
		case unix.BPF_MISC:
			switch in.Code & 0xf8 {
			case unix.BPF_TAX:
				x = a
			case unix.BPF_TXA:
				a = x
			default:
				return 0, fmt.Errorf("insn %d: misc op %#x", pc, in.Code&0xf8)
			}
		}
	}
	return 0, errNoReturn
}
