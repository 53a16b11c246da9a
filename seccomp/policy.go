package seccomp

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Action is what the filter does with a syscall that a rule (or the
// policy's default) matches.
type Action string

const (
	// ActAllow lets the syscall run (SECCOMP_RET_ALLOW).
	ActAllow Action = "allow"
	// ActErrno fails the syscall with the rule's errno without telling
	// anyone (SECCOMP_RET_ERRNO). Meant for calls a libc probes and falls
	// back from, such as clone3: they are not the payload's intent and
	// must not show up as denials.
	ActErrno Action = "errno"
	// ActNotifyErrno fails the syscall with the rule's errno and reports
	// it: the filter returns SECCOMP_RET_USER_NOTIF and Serve answers
	// with the errno and counts the syscall (seccomp_unotify(2)).
	ActNotifyErrno Action = "notify-errno"
	// ActKill kills the whole process (SECCOMP_RET_KILL_PROCESS, Linux
	// 4.14), which the parent sees as death by SIGSYS.
	ActKill Action = "kill"
	// ActHold stops the calling thread in the kernel until Serve's hold
	// callback has run, then lets the syscall run as if allowed
	// (SECCOMP_RET_USER_NOTIF answered with
	// SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5). It is not a denial
	// and is not counted. It decides nothing about the call (which could
	// race with its arguments, seccomp_unotify(2)): the sandbox init uses
	// it to act on a new process at a point before its execve. Without a
	// listener (the fallback program) it is plain allow.
	ActHold Action = "hold"
)

func (a Action) valid() bool {
	switch a {
	case ActAllow, ActErrno, ActNotifyErrno, ActKill, ActHold:
		return true
	}
	return false
}

// failsWithErrno reports whether the action makes the syscall return an
// error number (and so needs one).
func (a Action) failsWithErrno() bool { return a == ActErrno || a == ActNotifyErrno }

// Op is how an ArgCond tests one syscall argument. Every op is expressed
// with libseccomp's single-comparison conditions (seccomp_rule_add(3) allows
// one comparison per argument in a rule, so Compile expands an op into
// several rules where needed); the unit tests check each expansion against
// the plain Go meaning below by running the compiled program.
type Op string

const (
	// OpIn: the whole 64-bit register is one of Values. An argument with
	// stray upper bits matches nothing, so an allow rule fails closed.
	OpIn Op = "in"
	// OpNotIn: the whole 64-bit register is none of Values. Stray upper
	// bits make it match, so a deny rule fails closed.
	OpNotIn Op = "not-in"
	// OpMaskedIn: (arg & Mask) is one of Values. For deny rules on a
	// 32-bit kernel argument (ioctl's request is an unsigned int): with
	// Mask 0xffffffff the upper half the kernel ignores cannot dodge the
	// rule (Flatpak's TIOCSTI rule could be dodged so, CVE-2019-10063).
	OpMaskedIn Op = "masked-in"
	// OpAnyBit: arg & Mask != 0 (clone flags holding any CLONE_NEW*).
	OpAnyBit Op = "any-bit"
	// OpNoBit: arg & Mask == 0.
	OpNoBit Op = "no-bit"
	// OpMixed: arg & Mask is neither 0 nor Mask, i.e. some of Mask's bits
	// are set and some are clear. personality(2) takes an unsigned int
	// where 0 is PER_LINUX and 0xffffffff only queries; Mask 0xffffffff
	// matches every other persona, whatever the upper half holds.
	OpMixed Op = "mixed"
)

// ArgCond is a condition on one argument of a syscall (0-based, as in
// struct seccomp_data's args[]).
type ArgCond struct {
	Arg    int      `json:"arg"`
	Op     Op       `json:"op"`
	Values []uint64 `json:"values,omitempty"`
	Mask   uint64   `json:"mask,omitempty"`
}

// Rule applies Action to the syscalls it names when all of its Args hold.
type Rule struct {
	Names  []string `json:"names"`
	Action Action   `json:"action"`
	// Errno is what ActErrno and ActNotifyErrno return; 0 means EPERM.
	Errno int       `json:"errno,omitempty"`
	Args  []ArgCond `json:"args,omitempty"`
	// Why is the reason for the entry, shown by `sbx profile show`.
	Why string `json:"why"`
}

// Policy is a syscall policy as plain data: what happens to each syscall
// of the native architecture. Syscalls of any other ABI (32-bit int 0x80,
// x32) kill the process whatever the policy says.
//
// Meaning: a syscall gets the action of a matching non-allow rule if there
// is one (Validate makes all non-allow rules of one syscall agree), else
// allow if an allow rule matches, else Default.
type Policy struct {
	Name    string `json:"name"`
	Default Action `json:"default"`
	// DefaultErrno is what a default of errno or notify-errno returns;
	// 0 means EPERM.
	DefaultErrno int    `json:"default_errno,omitempty"`
	Rules        []Rule `json:"rules"`
}

// errnoOr returns e, or EPERM when e is 0.
func errnoOr(e int) int {
	if e == 0 {
		return int(unix.EPERM)
	}
	return e
}

// outcome is what the filter does for one syscall invocation.
type outcome struct {
	Action Action
	Errno  int // for ActErrno and ActNotifyErrno
}

func (r *Rule) outcome() outcome {
	if r.Action.failsWithErrno() {
		return outcome{r.Action, errnoOr(r.Errno)}
	}
	return outcome{r.Action, 0}
}

func (p *Policy) defaultOutcome() outcome {
	if p.Default.failsWithErrno() {
		return outcome{p.Default, errnoOr(p.DefaultErrno)}
	}
	return outcome{p.Default, 0}
}

// matches reports whether the argument value satisfies the condition. This
// is the reference meaning of each Op; the compiled program must agree.
func (c ArgCond) matches(v uint64) bool {
	switch c.Op {
	case OpIn:
		return slices.Contains(c.Values, v)
	case OpNotIn:
		return !slices.Contains(c.Values, v)
	case OpMaskedIn:
		return slices.Contains(c.Values, v&c.Mask)
	case OpAnyBit:
		return v&c.Mask != 0
	case OpNoBit:
		return v&c.Mask == 0
	case OpMixed:
		return v&c.Mask != 0 && v&c.Mask != c.Mask
	}
	return false
}

func (r *Rule) matches(args [6]uint64) bool {
	for _, c := range r.Args {
		if !c.matches(args[c.Arg]) {
			return false
		}
	}
	return true
}

// decide is the reference meaning of a policy for one invocation of the
// syscall name; the tests hold the compiled program to it.
func (p *Policy) decide(name string, args [6]uint64) outcome {
	allowed := false
	for i := range p.Rules {
		r := &p.Rules[i]
		if !slices.Contains(r.Names, name) || !r.matches(args) {
			continue
		}
		if r.Action != ActAllow {
			return r.outcome()
		}
		allowed = true
	}
	if allowed {
		return outcome{ActAllow, 0}
	}
	return p.defaultOutcome()
}

// maxEnum bounds how many single values an OpNotIn may have to spell out
// between two of its Values (each becomes one rule).
const maxEnum = 64

// atom is one libseccomp comparison (scmp_compare) on one argument.
type atom struct {
	Arg   int
	Cmp   cmp
	Mask  uint64 // for cmpMaskedEq
	Value uint64
}

type cmp int

const (
	cmpEq cmp = iota
	cmpLt
	cmpGt
	cmpMaskedEq
)

// alternatives expands the condition into atoms, any one of which holding
// means the condition holds.
func (c ArgCond) alternatives() ([]atom, error) {
	var out []atom
	switch c.Op {
	case OpIn:
		for _, v := range c.Values {
			out = append(out, atom{c.Arg, cmpEq, 0, v})
		}
	case OpMaskedIn:
		for _, v := range c.Values {
			out = append(out, atom{c.Arg, cmpMaskedEq, c.Mask, v})
		}
	case OpNoBit:
		out = append(out, atom{c.Arg, cmpMaskedEq, c.Mask, 0})
	case OpAnyBit:
		for m := c.Mask; m != 0; m &= m - 1 {
			b := m & -m
			out = append(out, atom{c.Arg, cmpMaskedEq, b, b})
		}
	case OpMixed:
		// arg&Mask is neither 0 nor Mask exactly when, going round Mask's
		// bits in a cycle, some bit is set and the next one is clear.
		var bitsOf []uint64
		for m := c.Mask; m != 0; m &= m - 1 {
			bitsOf = append(bitsOf, m&-m)
		}
		for i, b := range bitsOf {
			next := bitsOf[(i+1)%len(bitsOf)]
			out = append(out, atom{c.Arg, cmpMaskedEq, b | next, b})
		}
	case OpNotIn:
		vs := slices.Clone(c.Values)
		slices.Sort(vs)
		vs = slices.Compact(vs)
		if vs[0] > 0 {
			out = append(out, atom{c.Arg, cmpLt, 0, vs[0]})
		}
		for i := 1; i < len(vs); i++ {
			gap := vs[i] - vs[i-1] - 1
			if gap > maxEnum {
				return nil, fmt.Errorf("not-in %#x..%#x leaves %d values between them to list one by one (at most %d)", vs[i-1], vs[i], gap, maxEnum)
			}
			for v := vs[i-1] + 1; v < vs[i]; v++ {
				out = append(out, atom{c.Arg, cmpEq, 0, v})
			}
		}
		if last := vs[len(vs)-1]; last < math.MaxUint64 {
			out = append(out, atom{c.Arg, cmpGt, 0, last})
		}
	default:
		return nil, fmt.Errorf("unknown op %q", c.Op)
	}
	return out, nil
}

// conjunctions expands a rule's conditions into the libseccomp rules that
// together match exactly when all conditions hold: one []atom per rule (nil
// for a rule without conditions).
func (r *Rule) conjunctions() ([][]atom, error) {
	out := [][]atom{nil}
	for _, c := range r.Args {
		alts, err := c.alternatives()
		if err != nil {
			return nil, err
		}
		var next [][]atom
		for _, prefix := range out {
			for _, a := range alts {
				next = append(next, append(slices.Clone(prefix), a))
			}
		}
		out = next
	}
	return out, nil
}

func (c ArgCond) check() error {
	if c.Arg < 0 || c.Arg > 5 {
		return fmt.Errorf("arg %d: syscalls have arguments 0 to 5", c.Arg)
	}
	switch c.Op {
	case OpIn, OpNotIn:
		if len(c.Values) == 0 {
			return fmt.Errorf("arg %d %s: no values", c.Arg, c.Op)
		}
		if c.Mask != 0 {
			return fmt.Errorf("arg %d %s: takes no mask", c.Arg, c.Op)
		}
	case OpMaskedIn:
		if len(c.Values) == 0 || c.Mask == 0 {
			return fmt.Errorf("arg %d %s: needs a mask and values", c.Arg, c.Op)
		}
		for _, v := range c.Values {
			if v&^c.Mask != 0 {
				return fmt.Errorf("arg %d %s: value %#x has bits outside mask %#x, so it can never match", c.Arg, c.Op, v, c.Mask)
			}
		}
	case OpAnyBit, OpNoBit, OpMixed:
		if c.Mask == 0 || len(c.Values) != 0 {
			return fmt.Errorf("arg %d %s: needs a mask and no values", c.Arg, c.Op)
		}
		if c.Op == OpMixed && bits.OnesCount64(c.Mask) < 2 {
			return fmt.Errorf("arg %d %s: mask %#x needs at least two bits", c.Arg, c.Op, c.Mask)
		}
	default:
		return fmt.Errorf("arg %d: unknown op %q", c.Arg, c.Op)
	}
	_, err := c.alternatives()
	return err
}

func checkErrno(action Action, errno int) error {
	if !action.failsWithErrno() {
		if errno != 0 {
			return fmt.Errorf("errno %d given for action %s, which returns none", errno, action)
		}
		return nil
	}
	// SECCOMP_RET_DATA holds 16 bits, and the kernel caps the value at
	// MAX_ERRNO (4095) so that it reads as an error (seccomp(2)).
	if errno < 0 || errno > 4095 {
		return fmt.Errorf("errno %d out of range 1..4095", errno)
	}
	return nil
}

// Validate checks the policy is complete and that libseccomp can compile
// it exactly as written (it silently drops or refuses some combinations);
// it does not resolve syscall names, which Compile does.
func (p *Policy) Validate() error {
	if p == nil {
		return errors.New("seccomp: nil policy")
	}
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("policy has no name"))
	}
	if !p.Default.valid() {
		errs = append(errs, fmt.Errorf("default action %q unknown (allow, errno, notify-errno, kill)", p.Default))
	} else if err := checkErrno(p.Default, p.DefaultErrno); err != nil {
		errs = append(errs, fmt.Errorf("default: %w", err))
	}
	type perName struct {
		deny        *outcome // the non-allow outcome its rules share
		uncond      map[Action]bool
		conditional map[Action]bool
	}
	seen := map[string]*perName{}
	for i := range p.Rules {
		r := &p.Rules[i]
		where := fmt.Sprintf("rule %d (%s)", i, strings.Join(r.Names, ","))
		if len(r.Names) == 0 {
			errs = append(errs, fmt.Errorf("rule %d: no syscall names", i))
		}
		if strings.TrimSpace(r.Why) == "" {
			errs = append(errs, fmt.Errorf("%s: no reason (why)", where))
		}
		if !r.Action.valid() {
			errs = append(errs, fmt.Errorf("%s: action %q unknown", where, r.Action))
			continue
		}
		if err := checkErrno(r.Action, r.Errno); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		// libseccomp refuses a rule whose action is the filter's default
		// (EACCES, seccomp_rule_add(3)), in either program Compile builds.
		// A hold is the exception: Compile leaves it out of the program
		// whose default it equals (the default then does the same).
		if r.Action != ActHold && (sameAction(r.outcome(), p.defaultOutcome(), true) || sameAction(r.outcome(), p.defaultOutcome(), false)) {
			errs = append(errs, fmt.Errorf("%s: action %s is the same as the policy's default", where, describeOutcome(r.outcome())))
		}
		args := map[int]bool{}
		for _, c := range r.Args {
			if err := c.check(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
			// seccomp_rule_add(3): "you can only compare each argument
			// once in a single rule".
			if args[c.Arg] {
				errs = append(errs, fmt.Errorf("%s: arg %d tested twice", where, c.Arg))
			}
			args[c.Arg] = true
		}
		o := r.outcome()
		for _, n := range r.Names {
			s := seen[n]
			if s == nil {
				s = &perName{uncond: map[Action]bool{}, conditional: map[Action]bool{}}
				seen[n] = s
			}
			if len(r.Args) == 0 {
				if s.uncond[r.Action] {
					errs = append(errs, fmt.Errorf("%s: %s listed twice", where, n))
				}
				s.uncond[r.Action] = true
			} else {
				s.conditional[r.Action] = true
			}
			if r.Action == ActAllow {
				continue
			}
			if s.deny == nil {
				s.deny = &o
			} else if *s.deny != o {
				// One answer per syscall number keeps the policy's meaning
				// independent of rule order, and lets Serve answer a
				// notification from its number alone.
				errs = append(errs, fmt.Errorf("%s: %s is also %s %d in an earlier rule", where, n, s.deny.Action, s.deny.Errno))
			}
		}
	}
	for _, n := range sortedKeys(seen) {
		s := seen[n]
		// libseccomp drops a conditional rule when the same syscall has an
		// unconditional one (seccomp_rule_add(3)); with different actions
		// that would silently change the policy.
		for ua := range s.uncond {
			for ca := range s.conditional {
				if ua != ca {
					errs = append(errs, fmt.Errorf("syscall %s: unconditional %s hides conditional %s", n, ua, ca))
				}
			}
		}
		if len(s.uncond) > 1 {
			errs = append(errs, fmt.Errorf("syscall %s: unconditional rules disagree", n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seccomp policy %q: %w", p.Name, err)
	}
	return nil
}

// sameAction reports whether libseccomp sees one action in a and b: in the
// notify program every notify-errno is the same SECCOMP_RET_USER_NOTIF
// whatever its errno; in the fallback program it is a plain errno.
func sameAction(a, b outcome, notify bool) bool {
	for _, o := range []*outcome{&a, &b} {
		switch {
		case o.Action == ActHold && notify:
			o.Action, o.Errno = ActNotifyErrno, 0
		case o.Action == ActHold:
			o.Action = ActAllow
		case o.Action == ActNotifyErrno && !notify:
			o.Action = ActErrno
		}
	}
	if a.Action != b.Action {
		return false
	}
	return a.Action != ActErrno || a.Errno == b.Errno
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String prints the policy entry by entry with its reason, for
// `sbx profile show`.
func (p *Policy) String() string {
	if p == nil {
		return "seccomp: none (no filter)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seccomp policy %s: default %s\n", p.Name, describeOutcome(p.defaultOutcome()))
	fmt.Fprintf(&b, "  other ABIs (32-bit int 0x80, x32): kill\n")
	for i := range p.Rules {
		r := &p.Rules[i]
		fmt.Fprintf(&b, "  %s: %s", strings.Join(r.Names, ", "), describeOutcome(r.outcome()))
		for _, c := range r.Args {
			fmt.Fprintf(&b, " if %s", c)
		}
		fmt.Fprintf(&b, "\n      %s\n", r.Why)
	}
	return b.String()
}

func describeOutcome(o outcome) string {
	if o.Action.failsWithErrno() {
		return fmt.Sprintf("%s %s", o.Action, unix.ErrnoName(unix.Errno(o.Errno)))
	}
	return string(o.Action)
}

func (c ArgCond) String() string {
	hexes := func(vs []uint64) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = fmt.Sprintf("%#x", v)
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	switch c.Op {
	case OpIn, OpNotIn:
		return fmt.Sprintf("arg%d %s %s", c.Arg, c.Op, hexes(c.Values))
	case OpMaskedIn:
		return fmt.Sprintf("arg%d&%#x in %s", c.Arg, c.Mask, hexes(c.Values))
	}
	return fmt.Sprintf("arg%d %s %#x", c.Arg, c.Op, c.Mask)
}

// Decide returns what p does with a call of name with args: the action,
// and the errno for an action that fails the call. It reads the policy
// as data, the way the compiled filter acts (TestCompiledMatchesPolicy
// holds the two to each other), for property tests outside this package.
func (p *Policy) Decide(name string, args [6]uint64) (Action, int) {
	o := p.decide(name, args)
	return o.Action, o.Errno
}
