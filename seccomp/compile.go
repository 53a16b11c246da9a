//go:build cgo

package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// compiled caches filters by the policy's content: compiling takes
// milliseconds (DESIGN.md: compile once per profile), encoding the policy
// as a map key takes microseconds. The key is the whole encoding, not a
// hash of it, so no two policies can ever share a filter.
var compiled struct {
	sync.Mutex
	m map[string]*Filter
	// precompiled are the filters served from the embedded table.
	precompiled map[*Filter]bool
}

// Precompiled reports whether Compile served f from the filters embedded
// at build time (precompiled.go) rather than compiling it with libseccomp.
func Precompiled(f *Filter) bool {
	compiled.Lock()
	defer compiled.Unlock()
	return compiled.precompiled[f]
}

func mapAdd(m map[*Filter]bool, f *Filter) map[*Filter]bool {
	if m == nil {
		m = map[*Filter]bool{}
	}
	m[f] = true
	return m
}

// Compile turns a policy into a BPF program for the native architecture,
// on the host, before any namespace exists. A nil policy ("none") compiles
// to a nil filter. Results are cached by the policy's content, so the
// second call for the same policy returns the same *Filter at once; the
// built-in policies come precompiled (precompiled.go).
func Compile(p *Policy) (*Filter, error) {
	if p == nil {
		return nil, nil
	}
	key := string(p.appendKey(make([]byte, 0, 8<<10)))
	compiled.Lock()
	defer compiled.Unlock()
	if f := compiled.m[key]; f != nil {
		return f, nil
	}
	// A built-in policy, unchanged since go generate: its filter is
	// embedded (precompiled.go).
	f := lookupPrecompiled(key)
	if f != nil {
		compiled.precompiled = mapAdd(compiled.precompiled, f)
	} else {
		var err error
		if f, err = compile(p); err != nil {
			return nil, err
		}
	}
	if compiled.m == nil {
		compiled.m = map[string]*Filter{}
	}
	compiled.m[key] = f
	return f, nil
}

// appendKey encodes everything of the policy that Compile reads, without
// ambiguity: strings are length-prefixed, lists counted.
func (p *Policy) appendKey(b []byte) []byte {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v uint64) { b = binary.AppendUvarint(b, v) }
	str(p.Name)
	str(string(p.Default))
	num(uint64(p.DefaultErrno))
	num(uint64(len(p.Rules)))
	for _, r := range p.Rules {
		num(uint64(len(r.Names)))
		for _, n := range r.Names {
			str(n)
		}
		str(string(r.Action))
		num(uint64(r.Errno))
		num(uint64(len(r.Args)))
		for _, c := range r.Args {
			num(uint64(c.Arg))
			str(string(c.Op))
			num(c.Mask)
			num(uint64(len(c.Values)))
			for _, v := range c.Values {
				num(v)
			}
		}
	}
	return b
}

// resolvedRule is a rule for one syscall number, expanded into the
// libseccomp rules that together mean it.
type resolvedRule struct {
	name  string
	nr    int
	rule  *Rule
	conjs [][]atom
}

func compile(p *Policy) (*Filter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	arch, err := nativeArch()
	if err != nil {
		return nil, err
	}
	var rules []resolvedRule
	for i := range p.Rules {
		r := &p.Rules[i]
		conjs, err := r.conjunctions()
		if err != nil {
			return nil, fmt.Errorf("seccomp policy %q: rule %d: %w", p.Name, i, err)
		}
		for _, name := range r.Names {
			nr, err := SyscallNumber(name)
			if errors.Is(err, errNotNative) {
				continue // cannot be called here, so there is nothing to filter
			}
			if err != nil {
				return nil, fmt.Errorf("seccomp policy %q: rule %d: %w", p.Name, i, err)
			}
			rules = append(rules, resolvedRule{name, nr, r, conjs})
		}
	}

	f := &Filter{Policy: p.Name}
	for i := range p.Rules {
		f.Notify = f.Notify || p.Rules[i].Action == ActNotifyErrno || p.Rules[i].Action == ActHold
	}
	f.Notify = f.Notify || p.Default == ActNotifyErrno
	if f.BPF, err = build(p, rules, f.Notify); err != nil {
		return nil, err
	}
	if err := checkABIs(f.BPF, arch, foreignAction(f.Notify)); err != nil {
		return nil, fmt.Errorf("seccomp policy %q: %w", p.Name, err)
	}
	if !f.Notify {
		return f, nil
	}
	if f.Fallback, err = build(p, rules, false); err != nil {
		return nil, err
	}
	if err := checkABIs(f.Fallback, arch, foreignAction(false)); err != nil {
		return nil, fmt.Errorf("seccomp policy %q (fallback): %w", p.Name, err)
	}
	for _, r := range rules {
		switch r.rule.Action {
		case ActNotifyErrno:
			f.Errnos = mapSet(f.Errnos, r.nr, errnoOr(r.rule.Errno))
		case ActHold:
			f.Holds = append(f.Holds, r.nr)
		}
	}
	if p.Default == ActNotifyErrno {
		f.DefaultErrno = errnoOr(p.DefaultErrno)
	}
	return f, nil
}

func mapSet(m map[int]int, k, v int) map[int]int {
	if m == nil {
		m = map[int]int{}
	}
	m[k] = v
	return m
}

// scmpAction maps an outcome to libseccomp's action; without notify,
// notify-errno becomes a plain errno (the fallback program).
func scmpAction(o outcome, notify bool) libseccomp.ScmpAction {
	switch o.Action {
	case ActAllow:
		return libseccomp.ActAllow
	case ActKill:
		return libseccomp.ActKillProcess
	case ActNotifyErrno:
		if notify {
			return libseccomp.ActNotify
		}
	case ActHold:
		if notify {
			return libseccomp.ActNotify
		}
		return libseccomp.ActAllow
	}
	return libseccomp.ActErrno.SetReturnCode(int16(o.Errno))
}

// build compiles the policy with libseccomp. Only the native architecture
// is in the filter, and a call from any other ABI kills the process
// (SCMP_FLTATR_ACT_BADARCH): libseccomp then also rejects x32 numbers on
// x86_64, which checkABIs verifies.
func build(p *Policy, rules []resolvedRule, notify bool) ([]byte, error) {
	flt, err := libseccomp.NewFilter(scmpAction(p.defaultOutcome(), notify))
	if err != nil {
		return nil, fmt.Errorf("seccomp_init: %w", err)
	}
	defer flt.Release()
	// With a listener, a call through another ABI goes to Serve, which
	// kills the caller and records it: KILL_PROCESS leaves only a SIGSYS,
	// which a payload can also send itself (issue 11, finding 8).
	badArch := libseccomp.ActKillProcess
	if notify {
		badArch = libseccomp.ActNotify
	}
	if err := flt.SetBadArchAction(badArch); err != nil {
		return nil, fmt.Errorf("seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH, %v): %w", badArch, err)
	}
	// Load sets no_new_privs itself beforehand (and checks it); the
	// exported program does not depend on this.
	if err := flt.SetNoNewPrivsBit(false); err != nil {
		return nil, fmt.Errorf("seccomp_attr_set(SCMP_FLTATR_CTL_NNP, 0): %w", err)
	}
	// A binary search over syscall numbers instead of a linear chain
	// (libseccomp 2.5): the allowlist has ~200 entries.
	if err := flt.SetOptimize(2); err != nil {
		return nil, fmt.Errorf("seccomp_attr_set(SCMP_FLTATR_CTL_OPTIMIZE, 2): %w", err)
	}
	// libseccomp tries the argument checks of one syscall in the order the
	// rules were added, first match winning (observed with 2.5.4 and held
	// by the tests), so rules that deny go in before rules that allow: a
	// denial is never shadowed by a broader allow.
	for _, allows := range []bool{false, true} {
		for _, r := range rules {
			if (r.rule.Action == ActAllow) != allows {
				continue
			}
			act := scmpAction(r.rule.outcome(), notify)
			if r.rule.Action == ActHold && sameAction(r.rule.outcome(), p.defaultOutcome(), notify) {
				continue // the default does the same (see Validate)
			}
			for _, conj := range r.conjs {
				if err := addRule(flt, r.nr, act, conj); err != nil {
					return nil, fmt.Errorf("seccomp policy %q: seccomp_rule_add_exact(%s, %s): %w", p.Name, r.name, r.rule.Action, err)
				}
			}
		}
	}
	return exportBPF(flt)
}

func addRule(flt *libseccomp.ScmpFilter, nr int, act libseccomp.ScmpAction, conj []atom) error {
	if len(conj) == 0 {
		return flt.AddRuleExact(libseccomp.ScmpSyscall(nr), act)
	}
	conds := make([]libseccomp.ScmpCondition, len(conj))
	for i, a := range conj {
		var c libseccomp.ScmpCondition
		var err error
		switch a.Cmp {
		case cmpEq:
			c, err = libseccomp.MakeCondition(uint(a.Arg), libseccomp.CompareEqual, a.Value)
		case cmpLt:
			c, err = libseccomp.MakeCondition(uint(a.Arg), libseccomp.CompareLess, a.Value)
		case cmpGt:
			c, err = libseccomp.MakeCondition(uint(a.Arg), libseccomp.CompareGreater, a.Value)
		case cmpMaskedEq:
			// libseccomp takes the mask first, then the datum
			// (struct scmp_arg_cmp: datum_a is the mask).
			c, err = libseccomp.MakeCondition(uint(a.Arg), libseccomp.CompareMaskedEqual, a.Mask, a.Value)
		default:
			err = fmt.Errorf("comparison %d", a.Cmp)
		}
		if err != nil {
			return err
		}
		conds[i] = c
	}
	return flt.AddRuleConditionalExact(libseccomp.ScmpSyscall(nr), act, conds)
}

// exportBPF returns the program as struct sock_filter[]. libseccomp 2.6
// exports to memory; 2.5 only to a file descriptor, so a memfd stands in.
func exportBPF(flt *libseccomp.ScmpFilter) ([]byte, error) {
	b, err := flt.ExportBPFMem()
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, fmt.Errorf("seccomp_export_bpf_mem: %w", err)
	}
	fd, err := unix.MemfdCreate("sbx-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "memfd:sbx-seccomp-bpf")
	defer mf.Close()
	if err := flt.ExportBPF(mf); err != nil {
		return nil, fmt.Errorf("seccomp_export_bpf: %w", err)
	}
	if _, err := mf.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("lseek memfd: %w", err)
	}
	b, err = io.ReadAll(mf)
	if err != nil {
		return nil, fmt.Errorf("read memfd: %w", err)
	}
	return b, nil
}

// foreignAction is what a program returns for a call through another ABI:
// the listener's (Serve kills the caller) in a notify program, else
// KILL_PROCESS.
func foreignAction(notify bool) uint32 {
	if notify {
		return unix.SECCOMP_RET_USER_NOTIF
	}
	return unix.SECCOMP_RET_KILL_PROCESS
}

// checkABIs runs the program on calls from the other ABIs of this
// machine and fails unless each one gets want (foreignAction). It holds
// libseccomp to the property sbx relies on (an x32 or int 0x80 call never
// reaches the native rules, where its number would mean another syscall),
// whatever version is linked.
func checkABIs(prog []byte, arch archInfo, want uint32) error {
	insns, err := decodeBPF(prog)
	if err != nil {
		return err
	}
	// Numbers that matter on the native ABI: read, write, execve, mount,
	// ptrace, getpid, and the highest 32-bit value.
	probes := []int32{0, 1, 11, 20, 21, 26, 39, 59, 101, 165, 0x3fffffff}
	var cases []seccompData
	for _, foreign := range arch.Foreign {
		for _, nr := range probes {
			cases = append(cases, seccompData{Nr: nr, Arch: foreign})
		}
	}
	if arch.X32 {
		for _, nr := range probes {
			cases = append(cases, seccompData{Nr: nr | x32SyscallBit, Arch: arch.Native})
		}
	}
	for _, d := range cases {
		ret, err := runBPF(insns, &d)
		if err != nil {
			return fmt.Errorf("run program: %w", err)
		}
		if ret != want {
			return fmt.Errorf("program returns %#x, not %#x (KILL_PROCESS, or USER_NOTIF with a listener), for syscall %#x of arch %#x", ret, want, uint32(d.Nr), d.Arch)
		}
	}
	return nil
}
