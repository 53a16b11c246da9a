package seccomp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func mustBuiltin(t testing.TB, name string) *Policy {
	t.Helper()
	p, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCompile(t testing.TB, p *Policy) *Filter {
	t.Helper()
	f, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// retFor is the SECCOMP_RET_* value the program must return for o.
func retFor(o outcome, notify bool) uint32 {
	switch o.Action {
	case ActAllow:
		return unix.SECCOMP_RET_ALLOW
	case ActKill:
		return unix.SECCOMP_RET_KILL_PROCESS
	case ActNotifyErrno:
		if notify {
			return unix.SECCOMP_RET_USER_NOTIF
		}
	case ActHold:
		if notify {
			return unix.SECCOMP_RET_USER_NOTIF
		}
		return unix.SECCOMP_RET_ALLOW
	}
	return unix.SECCOMP_RET_ERRNO | uint32(o.Errno)
}

// highestNr bounds the syscall numbers tried: a little past the newest
// syscall of x86_64 and arm64.
const highestNr = 520

// argVectors returns argument lists worth trying for syscall name under
// p: zeros, random ones, and the probe values of every condition of every
// rule naming it, alone and crossed with another condition's.
func argVectors(p *Policy, name string, rng *rand.Rand) [][6]uint64 {
	out := [][6]uint64{{}}
	for range 4 {
		var a [6]uint64
		for i := range a {
			a[i] = rng.Uint64()
		}
		out = append(out, a)
	}
	for _, r := range p.Rules {
		if !contains(r.Names, name) {
			continue
		}
		for i, c := range r.Args {
			for _, v := range probeValues(c, rng) {
				var a [6]uint64
				a[c.Arg] = v
				out = append(out, a)
				for _, d := range r.Args[i+1:] {
					dv := probeValues(d, rng)
					for range 3 {
						b := a
						b[d.Arg] = dv[rng.IntN(len(dv))]
						out = append(out, b)
					}
				}
			}
		}
	}
	return out
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// checkProgram runs prog on every syscall number with many argument lists
// and compares each result with the policy's reference meaning.
func checkProgram(t *testing.T, p *Policy, prog []byte, notify bool) {
	t.Helper()
	arch, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	insns, err := decodeBPF(prog)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	failures := 0
	for nr := 0; nr <= highestNr; nr++ {
		name := SyscallName(nr)
		for _, args := range argVectors(p, name, rng) {
			d := seccompData{Nr: int32(nr), Arch: arch.Native, IP: rng.Uint64(), Args: args}
			got, err := runBPF(insns, &d)
			if err != nil {
				t.Fatalf("%s%#x: %v", name, args, err)
			}
			o := p.decide(name, args)
			if want := retFor(o, notify); got != want {
				t.Errorf("%s (%d) %#x: program returns %#x, policy says %s %d (%#x)", name, nr, args, got, o.Action, o.Errno, want)
				if failures++; failures > 20 {
					t.Fatal("too many mismatches")
				}
			}
		}
	}
}

// checkCalls runs prog on the given calls and compares each result with
// the policy's reference meaning.
func checkCalls(t *testing.T, p *Policy, prog []byte, notify bool, calls []call) {
	t.Helper()
	arch, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	insns, err := decodeBPF(prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range calls {
		nr, err := SyscallNumber(cl.name)
		if err != nil {
			continue // not on this architecture
		}
		d := seccompData{Nr: int32(nr), Arch: arch.Native, Args: cl.args}
		got, err := runBPF(insns, &d)
		if err != nil {
			t.Fatalf("%v: %v", cl, err)
		}
		o := p.decide(cl.name, cl.args)
		if want := retFor(o, notify); got != want {
			t.Errorf("%v: program returns %#x, policy says %s %d (%#x)", cl, got, o.Action, o.Errno, want)
		}
	}
}

// synthetic policies cover what the built-in ones do not: every action,
// multi-argument rules, allow and deny rules on one syscall (in either
// order in the policy), and non-default errnos.
func syntheticPolicies() []*Policy {
	return []*Policy{
		{
			Name: "mixed", Default: ActNotifyErrno, DefaultErrno: int(unix.EACCES),
			Rules: []Rule{
				// The allow comes first in the policy and overlaps the deny
				// below: Compile must still let the deny win.
				{Names: []string{"ioctl"}, Action: ActAllow, Args: []ArgCond{{Arg: 1, Op: OpNoBit, Mask: 0xffffffff00000000}}, Why: "w"},
				{Names: []string{"ioctl"}, Action: ActErrno, Errno: int(unix.EPERM), Args: []ArgCond{{Arg: 1, Op: OpMaskedIn, Mask: 0xffffffff, Values: []uint64{unix.TIOCSTI, unix.TIOCLINUX}}}, Why: "w"},
				{Names: []string{"socket"}, Action: ActAllow, Args: []ArgCond{
					{Arg: 0, Op: OpIn, Values: []uint64{unix.AF_INET, unix.AF_INET6}},
					{Arg: 1, Op: OpNoBit, Mask: ^uint64(unix.SOCK_STREAM | unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)},
				}, Why: "w"},
				// Allow on one argument, deny on another, same syscall.
				{Names: []string{"fcntl"}, Action: ActAllow, Args: []ArgCond{{Arg: 1, Op: OpIn, Values: []uint64{unix.F_GETFD, unix.F_SETFD}}}, Why: "w"},
				{Names: []string{"fcntl"}, Action: ActKill, Args: []ArgCond{{Arg: 0, Op: OpIn, Values: []uint64{100, 200}}}, Why: "w"},
				{Names: []string{"read", "write", "close", "exit_group"}, Action: ActAllow, Why: "w"},
				{Names: []string{"ptrace"}, Action: ActKill, Why: "w"},
				{Names: []string{"mmap"}, Action: ActAllow, Args: []ArgCond{{Arg: 2, Op: OpMixed, Mask: unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC}}, Why: "w"},
			},
		},
		{
			Name: "killer", Default: ActAllow,
			Rules: []Rule{
				{Names: []string{"acct", "swapon"}, Action: ActKill, Why: "w"},
				{Names: []string{"clone"}, Action: ActKill, Args: []ArgCond{{Arg: 0, Op: OpAnyBit, Mask: unix.CLONE_NEWUSER | unix.CLONE_NEWNET}}, Why: "w"},
				{Names: []string{"socket"}, Action: ActErrno, Errno: int(unix.EAFNOSUPPORT), Args: []ArgCond{
					{Arg: 0, Op: OpNotIn, Values: socketFamilies},
					{Arg: 2, Op: OpNotIn, Values: []uint64{0}},
				}, Why: "w"},
				{Names: []string{"personality"}, Action: ActNotifyErrno, Errno: int(unix.EINVAL), Args: []ArgCond{{Arg: 0, Op: OpMixed, Mask: 0xffffffff}}, Why: "w"},
				{Names: []string{"kill"}, Action: ActNotifyErrno, Args: []ArgCond{{Arg: 1, Op: OpNotIn, Values: []uint64{0, 9, 15}}, {Arg: 0, Op: OpIn, Values: []uint64{1}}}, Why: "w"},
			},
		},
		{
			Name: "enosys", Default: ActErrno, DefaultErrno: int(unix.ENOSYS),
			Rules: []Rule{
				{Names: []string{"read", "write", "exit_group", "arch_prctl", "open", "getdents"}, Action: ActAllow, Why: "w"},
				{Names: []string{"ptrace", "mount"}, Action: ActNotifyErrno, Why: "w"},
			},
		},
		{
			Name: "deadly", Default: ActKill,
			Rules: []Rule{{Names: []string{"exit_group", "getppid"}, Action: ActAllow, Why: "w"}},
		},
	}
}

// TestCompiledMatchesPolicy runs every compiled program, notify and
// fallback, in the BPF interpreter against the policy's meaning.
func TestCompiledMatchesPolicy(t *testing.T) {
	policies := append([]*Policy{mustBuiltin(t, Allowlist), mustBuiltin(t, Denylist), guardPolicy()}, syntheticPolicies()...)
	for _, p := range policies {
		t.Run(p.Name, func(t *testing.T) {
			f := mustCompile(t, p)
			checkProgram(t, p, f.BPF, f.Notify)
			if f.Notify {
				checkProgram(t, p, f.Fallback, false)
			} else if f.Fallback != nil {
				t.Error("a filter without notify has a fallback")
			}
		})
	}
}

func TestOtherABIsAreKilled(t *testing.T) {
	arch, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	for _, p := range append([]*Policy{mustBuiltin(t, Allowlist), mustBuiltin(t, Denylist)}, syntheticPolicies()...) {
		f := mustCompile(t, p)
		for i, prog := range [][]byte{f.BPF, f.Fallback} {
			if prog == nil {
				continue
			}
			// With a listener Serve kills the caller (and says so);
			// without one the kernel does.
			want := foreignAction(i == 0 && f.Notify)
			insns, _ := decodeBPF(prog)
			for nr := int32(0); nr <= highestNr; nr++ {
				var cases []seccompData
				for _, a := range arch.Foreign {
					cases = append(cases, seccompData{Nr: nr, Arch: a})
				}
				if arch.X32 {
					cases = append(cases, seccompData{Nr: nr | x32SyscallBit, Arch: arch.Native})
				}
				cases = append(cases, seccompData{Nr: nr, Arch: 0xdeadbeef})
				for _, d := range cases {
					if ret, err := runBPF(insns, &d); err != nil || ret != want {
						t.Fatalf("%s: syscall %#x arch %#x: %#x, %v; want %#x", p.Name, uint32(d.Nr), d.Arch, ret, err, want)
					}
				}
			}
		}
	}
}

// TestCheckABIsCatchesLeaks shows the self-check in Compile can fail: a
// program that allows everything lets x32 and i386 calls through.
func TestCheckABIsCatchesLeaks(t *testing.T) {
	arch, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	allowAll := encodeBPF([]unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}})
	if err := checkABIs(allowAll, arch, unix.SECCOMP_RET_KILL_PROCESS); err == nil || !strings.Contains(err.Error(), "KILL_PROCESS") {
		t.Errorf("checkABIs(allow all) = %v", err)
	}
	// An arch check without the x32 check: what a hand-written filter
	// often forgets.
	archOnly := encodeBPF([]unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, K: arch.Native},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	})
	err = checkABIs(archOnly, arch, unix.SECCOMP_RET_KILL_PROCESS)
	if arch.X32 && (err == nil || !strings.Contains(err.Error(), "syscall 0x40000000")) {
		t.Errorf("checkABIs(arch check only) = %v, want the x32 leak named", err)
	}
}

func encodeBPF(insns []unix.SockFilter) []byte {
	var b bytes.Buffer
	for _, in := range insns {
		binary.Write(&b, binary.NativeEndian, in)
	}
	return b.Bytes()
}

func TestRunBPF(t *testing.T) {
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	jmp := func(op uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	alu := func(op uint16, k uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_ALU | op | unix.BPF_K, K: k}
	}
	d := seccompData{Nr: 59, Arch: 0xc000003e, IP: 0x1122334455667788, Args: [6]uint64{0xaaaabbbbccccdddd, 7}}
	tests := []struct {
		name  string
		prog  []unix.SockFilter
		want  uint32
		fails bool
	}{
		{"ret k", []unix.SockFilter{ret(5)}, 5, false},
		{"load nr", []unix.SockFilter{ld(0), {Code: unix.BPF_RET | unix.BPF_A}}, 59, false},
		{"load arch", []unix.SockFilter{ld(4), {Code: unix.BPF_RET | unix.BPF_A}}, 0xc000003e, false},
		{"args are native-endian halves", []unix.SockFilter{ld(16), {Code: unix.BPF_RET | unix.BPF_A}}, 0xccccdddd, false},
		{"upper half", []unix.SockFilter{ld(20), {Code: unix.BPF_RET | unix.BPF_A}}, 0xaaaabbbb, false},
		{"jeq taken", []unix.SockFilter{ld(0), jmp(unix.BPF_JEQ, 59, 1, 0), ret(1), ret(2)}, 2, false},
		{"jeq not taken", []unix.SockFilter{ld(0), jmp(unix.BPF_JEQ, 60, 1, 0), ret(1), ret(2)}, 1, false},
		{"jgt/jge", []unix.SockFilter{ld(0), jmp(unix.BPF_JGT, 59, 2, 0), jmp(unix.BPF_JGE, 59, 0, 1), ret(3), ret(4)}, 3, false},
		{"jset", []unix.SockFilter{ld(24), jmp(unix.BPF_JSET, 4, 0, 1), ret(1), ret(2)}, 1, false},
		{"jset clear", []unix.SockFilter{ld(24), jmp(unix.BPF_JSET, 8, 0, 1), ret(1), ret(2)}, 2, false},
		{"ja", []unix.SockFilter{{Code: unix.BPF_JMP | unix.BPF_JA, K: 1}, ret(1), ret(2)}, 2, false},
		{"alu and/or/shift", []unix.SockFilter{ld(0), alu(unix.BPF_AND, 0xf), alu(unix.BPF_OR, 0x100), alu(unix.BPF_LSH, 4), alu(unix.BPF_RSH, 1), {Code: unix.BPF_RET | unix.BPF_A}}, (59&0xf | 0x100) << 4 >> 1, false},
		{"scratch and x", []unix.SockFilter{ld(0), {Code: unix.BPF_ST, K: 3}, {Code: unix.BPF_LD | unix.BPF_IMM, K: 1}, {Code: unix.BPF_LDX | unix.BPF_MEM, K: 3}, {Code: unix.BPF_ALU | unix.BPF_ADD | unix.BPF_X}, {Code: unix.BPF_RET | unix.BPF_A}}, 60, false},
		{"tax txa", []unix.SockFilter{ld(0), {Code: unix.BPF_MISC | unix.BPF_TAX}, {Code: unix.BPF_LD | unix.BPF_IMM, K: 0}, {Code: unix.BPF_MISC | unix.BPF_TXA}, {Code: unix.BPF_RET | unix.BPF_A}}, 59, false},
		{"div by zero kills", []unix.SockFilter{ld(0), alu(unix.BPF_DIV, 0), ret(7)}, 0, false},
		{"misaligned load", []unix.SockFilter{ld(2), ret(1)}, 0, true},
		{"load past end", []unix.SockFilter{ld(64), ret(1)}, 0, true},
		{"runs off end", []unix.SockFilter{ld(0)}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runBPF(tc.prog, &d)
			if tc.fails {
				if err == nil {
					t.Errorf("runBPF = %#x, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("runBPF = %#x, %v; want %#x", got, err, tc.want)
			}
		})
	}
	if _, err := decodeBPF([]byte{1, 2, 3}); err == nil {
		t.Error("decodeBPF accepts a partial instruction")
	}
	if _, err := decodeBPF(make([]byte, 8*4097)); err == nil {
		t.Error("decodeBPF accepts more than BPF_MAXINSNS instructions")
	}
}

func TestCompileCaches(t *testing.T) {
	if f, err := Compile(nil); f != nil || err != nil {
		t.Fatalf("Compile(nil) = %v, %v; want no filter", f, err)
	}
	p := mustBuiltin(t, Allowlist)
	p.Name = "allowlist-cache-test" // not cached by any other test
	t0 := time.Now()
	f1 := mustCompile(t, p)
	cold := time.Since(t0)
	t1 := time.Now()
	f2 := mustCompile(t, mustBuiltin(t, Allowlist))
	_ = f2
	p2 := mustBuiltin(t, Allowlist)
	p2.Name = "allowlist-cache-test"
	t2 := time.Now()
	f3 := mustCompile(t, p2)
	warm := time.Since(t2)
	_ = t1
	if f1 != f3 {
		t.Error("a second Compile of an equal policy compiled again")
	}
	p2.Rules = p2.Rules[1:]
	if f4 := mustCompile(t, p2); f4 == f1 || bytes.Equal(f4.BPF, f1.BPF) {
		t.Error("a changed policy got the cached filter")
	}
	t.Logf("Compile(allowlist): %v cold (notify and fallback programs), %v cached", cold, warm)
}

func TestCompileRejects(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{Name: "typo", Default: ActAllow, Rules: []Rule{{Names: []string{"ptrcae"}, Action: ActKill, Why: "w"}}}, `syscall "ptrcae": unknown`},
		{Policy{Name: "invalid", Default: ActAllow, Rules: []Rule{{Names: []string{"ptrace"}, Action: ActAllow, Why: "w"}}}, "same as the policy's default"},
	} {
		if _, err := Compile(&tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v, want %q", tc.p.Name, err, tc.want)
		}
	}
}

func TestFilterJSON(t *testing.T) {
	for _, name := range []string{Allowlist, Denylist} {
		f := mustCompile(t, mustBuiltin(t, name))
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var g Filter
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*f, g) {
			t.Errorf("%s: filter changes through JSON", name)
		}
		t.Logf("%s: %d instructions, %d bytes of JSON", name, len(f.BPF)/8, len(b))
	}
}

func TestErrnos(t *testing.T) {
	deny := mustCompile(t, mustBuiltin(t, Denylist))
	if !deny.Notify || deny.Errnos[unix.SYS_PTRACE] != int(unix.EPERM) || deny.Errnos[unix.SYS_SOCKET] != int(unix.EPERM) {
		t.Errorf("denylist: notify %v, errnos %v", deny.Notify, deny.Errnos)
	}
	if _, ok := deny.Errnos[unix.SYS_CLONE3]; ok {
		t.Error("denylist: clone3 is notified; its ENOSYS must stay silent")
	}
	if _, ok := deny.Errnos[unix.SYS_GETPID]; ok {
		t.Error("denylist: getpid has an errno")
	}
	allow := mustCompile(t, mustBuiltin(t, Allowlist))
	if !allow.Notify || allow.DefaultErrno != int(unix.EPERM) || allow.ErrnoFor(unix.SYS_MOUNT) != int(unix.EPERM) {
		t.Errorf("allowlist: notify %v, default errno %d", allow.Notify, allow.DefaultErrno)
	}
	enosys := mustCompile(t, syntheticPolicies()[2])
	if enosys.ErrnoFor(unix.SYS_PTRACE) != int(unix.EPERM) || enosys.DefaultErrno != 0 {
		t.Errorf("enosys: ptrace answered %d, default %d", enosys.ErrnoFor(unix.SYS_PTRACE), enosys.DefaultErrno)
	}
	killer := mustCompile(t, syntheticPolicies()[1])
	if killer.ErrnoFor(unix.SYS_PERSONALITY) != int(unix.EINVAL) {
		t.Errorf("killer: personality answered %d, want EINVAL", killer.ErrnoFor(unix.SYS_PERSONALITY))
	}
	// Never 0: a 0 answer would make the denied call succeed.
	for _, f := range []Filter{{}, {Errnos: map[int]int{5: 0}}, {DefaultErrno: -3}, {Errnos: map[int]int{5: 70000}}} {
		if e := f.ErrnoFor(5); e != int(unix.EPERM) {
			t.Errorf("%+v.ErrnoFor(5) = %d, want EPERM", f, e)
		}
	}
}

func TestSyscallNames(t *testing.T) {
	for _, name := range []string{"read", "ptrace", "clone3", "io_uring_setup", "mount_setattr", "futex_waitv", "open_tree_attr", "statmount"} {
		nr, err := SyscallNumber(name)
		if err != nil {
			t.Errorf("SyscallNumber(%s): %v", name, err)
			continue
		}
		if got := SyscallName(nr); got != name {
			t.Errorf("SyscallName(SyscallNumber(%s) = %d) = %s", name, nr, got)
		}
	}
	if n, _ := SyscallNumber("ptrace"); n != unix.SYS_PTRACE {
		t.Errorf("ptrace is %d here, x/sys says %d", n, unix.SYS_PTRACE)
	}
	for nr, want := range map[int]string{-1: "syscall_-1", 100000: "syscall_100000"} {
		if got := SyscallName(nr); got != want {
			t.Errorf("SyscallName(%d) = %q, want %q", nr, got, want)
		}
	}
	if _, err := SyscallNumber("no_such_call"); err == nil || errors.Is(err, errNotNative) {
		t.Errorf("SyscallNumber(no_such_call) = %v", err)
	}
}

// TestCompileKeyCoversPolicy: the cache key must change with every field
// Compile reads, or a changed policy would get a stale filter.
func TestCompileKeyCoversPolicy(t *testing.T) {
	// A new field must be added to appendKey (and here).
	for typ, n := range map[reflect.Type]int{reflect.TypeOf(Policy{}): 4, reflect.TypeOf(Rule{}): 5, reflect.TypeOf(ArgCond{}): 4} {
		if typ.NumField() != n {
			t.Errorf("%v has %d fields, appendKey knows %d", typ, typ.NumField(), n)
		}
	}
	base := func() *Policy {
		return &Policy{Name: "k", Default: ActAllow, Rules: []Rule{{
			Names: []string{"ioctl"}, Action: ActNotifyErrno, Errno: 1,
			Args: []ArgCond{{Arg: 1, Op: OpMaskedIn, Mask: 0xffff, Values: []uint64{1, 2}}}, Why: "w",
		}}}
	}
	key := func(p *Policy) string { return string(p.appendKey(nil)) }
	k0 := key(base())
	for name, edit := range map[string]func(p *Policy){
		"Name": func(p *Policy) { p.Name = "k2" }, "Default": func(p *Policy) { p.Default = ActKill },
		"DefaultErrno": func(p *Policy) { p.DefaultErrno = 2 }, "Rules": func(p *Policy) { p.Rules = append(p.Rules, p.Rules[0]) },
		"Names": func(p *Policy) { p.Rules[0].Names = []string{"ioctl", "read"} }, "Action": func(p *Policy) { p.Rules[0].Action = ActErrno },
		"Errno": func(p *Policy) { p.Rules[0].Errno = 2 }, "Args": func(p *Policy) { p.Rules[0].Args = nil },
		"Arg": func(p *Policy) { p.Rules[0].Args[0].Arg = 2 }, "Op": func(p *Policy) { p.Rules[0].Args[0].Op = OpIn },
		"Mask": func(p *Policy) { p.Rules[0].Args[0].Mask = 0xfff }, "Values": func(p *Policy) { p.Rules[0].Args[0].Values = []uint64{1} },
		"names split": func(p *Policy) { p.Rules[0].Names = []string{"io", "ctl"} },
	} {
		p := base()
		edit(p)
		if key(p) == k0 {
			t.Errorf("changing %s leaves the cache key alone", name)
		}
	}
	// Why does not reach the program, so it may share the filter.
	p := base()
	p.Rules[0].Why = "other"
	if key(p) != k0 {
		t.Error("the reason changes the cache key")
	}
}
