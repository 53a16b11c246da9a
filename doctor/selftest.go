package doctor

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// payloads are the self-test's escape attempts, run as Python inside real
// sandboxes.
//
//go:embed selftest/*.py
var payloads embed.FS

// Payload returns the source of one embedded attempt.
func Payload(name string) (string, error) {
	b, err := payloads.ReadFile("selftest/" + name)
	return string(b), err
}

// HostAction is what the host side does around an attempt.
type HostAction uint8

const (
	HostNone HostAction = iota
	// HostListener listens on 127.0.0.1 of the host before the run and
	// passes its port as the payload's last argument; Outcome.Host
	// ["listener"] says whether anything connected.
	HostListener
	// HostInotify waits for the payload's first line, then calls
	// inotify_init1 on the host while the payload holds its instances,
	// then closes the payload's stdin; Outcome.Host["inotify_init1"] is
	// "ok" or the errno name.
	HostInotify
	// HostOutputDir copies the run's files to a temporary --output-dir;
	// Outcome.OutputBytes is what reading every file there gives.
	HostOutputDir
)

// Attempt is one escape attempt of `sbx doctor --self-test`: plain data
// but for its judge. Profile is a built-in profile, run through the same
// path as `sbx exec`.
type Attempt struct {
	Name    string
	Payload string   // a file of selftest/
	Args    []string // the payload's argv after the script
	Profile string
	// AllowHost turns the proxy on (--allow-host) for this one host.
	AllowHost string
	Host      HostAction
	// Blocked says in one line what "blocked" means for this attempt.
	Blocked string
	// Judge says whether the attempt was blocked, and why, in one line.
	Judge func(o *Outcome) (bool, string)
}

// Outcome is what one attempt left behind.
type Outcome struct {
	Result *nsjail.Result
	// Out is the payload's stdout as one JSON value; nil when it printed
	// none.
	Out  any
	Host map[string]string
	// OutputBytes is the sum of the sizes of every regular file under
	// the --output-dir, counting each name (HostOutputDir).
	OutputBytes int64
	// Err says the attempt could not be run at all.
	Err error
}

// Finding is the verdict on one attempt.
type Finding struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	Blocked bool   `json:"blocked"`
	// Verdict is "blocked", "NOT BLOCKED", or "error" (the attempt could
	// not run, so nothing was verified).
	Verdict string `json:"verdict"`
	Means   string `json:"means"`
	Detail  string `json:"detail"`
}

// Verdicts.
const (
	VerdictBlocked    = "blocked"
	VerdictNotBlocked = "NOT BLOCKED"
	VerdictError      = "error"
)

// SelfTestReport is the whole self-test.
type SelfTestReport struct {
	Kernel   string    `json:"kernel"`
	UID      int       `json:"uid"`
	Findings []Finding `json:"self_test"`
	// OK is true when every attempt was blocked.
	OK bool `json:"ok"`
}

// Judge turns outcomes into findings. An attempt that could not run, or
// whose payload printed no JSON where its judge needs some, is an error,
// never a pass.
func Judge(a Attempt, o *Outcome) Finding {
	f := Finding{Name: a.Name, Profile: a.Profile, Means: a.Blocked, Verdict: VerdictError}
	if a.AllowHost != "" {
		f.Profile += " --allow-host " + a.AllowHost
	}
	switch {
	case o.Err != nil:
		f.Detail = o.Err.Error()
	case o.Result == nil:
		f.Detail = "no Result"
	case o.Result.Status == nsjail.StatusSetupError:
		f.Detail = "the sandbox could not be built: " + o.Result.Message
	case o.Result.Status == nsjail.StatusNotFound || o.Result.Status == nsjail.StatusCannotExec:
		f.Detail = "python3 could not be run in the rootfs: " + o.Result.Message
	default:
		f.Blocked, f.Detail = a.Judge(o)
		f.Verdict = VerdictNotBlocked
		if f.Blocked {
			f.Verdict = VerdictBlocked
		}
	}
	return f
}

// outMap is the payload's output as a JSON object of strings.
func outMap(o *Outcome) (map[string]string, bool) {
	m, ok := o.Out.(map[string]any)
	if !ok {
		return nil, false
	}
	s := map[string]string{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			s[k] = v
		default:
			b, _ := json.Marshal(v)
			s[k] = string(b)
		}
	}
	return s, true
}

// noOutput is the verdict when a payload that should have printed its
// findings did not: not blocked, since nothing shows it was.
func noOutput(o *Outcome) (bool, string) {
	r := o.Result
	return false, fmt.Sprintf("the payload printed no findings (status %s %s; stderr %q)", r.Status, r.Message, tail(r.Stderr, 200))
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// judgeAll passes when every key of the payload's object satisfies ok;
// the detail lists the keys that did not, or all when all did.
func judgeAll(ok func(k, v string) bool) func(o *Outcome) (bool, string) {
	return func(o *Outcome) (bool, string) {
		m, has := outMap(o)
		if !has || len(m) == 0 {
			return noOutput(o)
		}
		var bad, good []string
		for _, k := range sortedKeys(m) {
			if ok(k, m[k]) {
				good = append(good, k+" "+m[k])
			} else {
				bad = append(bad, k+" "+m[k])
			}
		}
		if len(bad) > 0 {
			return false, "got through: " + strings.Join(bad, ", ")
		}
		return true, strings.Join(good, ", ")
	}
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// refused is an errno that means the call never did anything, or the
// filter's kill.
func refused(v string) bool {
	switch v {
	case "EPERM", "EACCES", "ENOSYS", "EROFS", "ENOENT", "killed:SIGSYS", "killed:SIGKILL":
		return true
	}
	return false
}

// seccompJudge passes when every dangerous call failed and the filter
// itself refused each one: it is named in the Result's seccomp_denials. A
// call that failed only because the kernel behind the filter said EPERM
// would pass the errno test but not this one. Where the kernel gave no
// listener (the seccomp layer is degraded), the errnos are all there is
// to judge by, and the detail says so.
func seccompJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has || len(m) == 0 {
		return noOutput(o)
	}
	if l := o.Result.Layers["seccomp"]; l.State == nsjail.LayerOff {
		return false, "no seccomp filter: " + l.Detail
	}
	denied := map[string]bool{}
	for _, d := range o.Result.SeccompDenials {
		denied[d.Syscall] = true
	}
	known := o.Result.SeccompDenials != nil
	var bad []string
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch {
		case !refused(v):
			bad = append(bad, k+" "+v)
		case known && !denied[k] && !strings.HasPrefix(v, "killed:"):
			bad = append(bad, k+" "+v+" (from the kernel, not the filter)")
		}
	}
	if len(bad) > 0 {
		return false, "got through: " + strings.Join(bad, ", ")
	}
	if !known {
		return true, fmt.Sprintf("all %d failed (%s); the kernel gave no seccomp listener, so the errnos alone were judged", len(m), strings.Join(sortedKeys(m), " "))
	}
	return true, fmt.Sprintf("the filter refused all %d (%s)", len(m), strings.Join(sortedKeys(m), " "))
}

func fdsJudge(o *Outcome) (bool, string) {
	fds, ok := o.Out.([]any)
	if !ok {
		return noOutput(o)
	}
	s := fmt.Sprint(fds...)
	if len(fds) == 3 && s == fmt.Sprint(0.0, 1.0, 2.0) {
		return true, "open fds: 0 1 2"
	}
	return false, fmt.Sprintf("open fds: %v", fds)
}

// procJudge: every read-side file is unreadable or masked (empty), every
// write-side file refuses to open for writing.
func procJudge(_, v string) bool {
	return v == "empty" || v == "masked" || refused(v)
}

// prlimitJudge: the payload cannot change the init's limits, which is
// what let it suppress or wreck the report (issue 11, finding 4): the set
// is refused, or the init is not even visible (ESRCH). Reading them is
// reported, not judged: it changes nothing.
func prlimitJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has || m["set"] == "" {
		return noOutput(o)
	}
	d := fmt.Sprintf("set %s (get %s)", m["set"], m["get"])
	return refused(m["set"]) || m["set"] == "ESRCH", d
}

func connectJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has || m["connect"] == "" {
		return noOutput(o)
	}
	c := m["connect"]
	if c == "ok" {
		return false, "the payload connected"
	}
	if l := o.Host["listener"]; l != "" && l != "no connection" {
		return false, "the host listener saw " + l
	}
	d := "connect: " + c
	if l := o.Host["listener"]; l != "" {
		d += "; host listener: " + l
	}
	return true, d
}

// statusJudge: no capability in any set, no_new_privs, seccomp filter mode.
func statusJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has {
		return noOutput(o)
	}
	want := map[string]string{"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
	var bad, all []string
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"} {
		all = append(all, k+" "+m[k])
		if m[k] != want[k] {
			bad = append(bad, fmt.Sprintf("%s %q (want %s)", k, m[k], want[k]))
		}
	}
	if len(bad) > 0 {
		return false, strings.Join(bad, ", ")
	}
	return true, strings.Join(all, ", ")
}

// killInitJudge: the payload outlived its signals to the init (it printed
// its last word) and the run ended normally, reported by the init.
func killInitJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	r := o.Result
	if !has || m["after"] != "true" {
		return false, fmt.Sprintf("the payload did not outlive its signals to the init: status %s %s", r.Status, r.Message)
	}
	if r.Status != nsjail.StatusOK {
		return false, fmt.Sprintf("status %s (%s) after SIGTERM %s, SIGKILL %s", r.Status, r.Message, m["SIGTERM"], m["SIGKILL"])
	}
	return true, fmt.Sprintf("SIGTERM %s, SIGKILL %s, no effect: status ok", m["SIGTERM"], m["SIGKILL"])
}

// sigxcpuJudge: a status names a limit only on evidence the payload
// cannot forge; a SIGXCPU it sent itself is a signal.
func sigxcpuJudge(o *Outcome) (bool, string) {
	r := o.Result
	sig := ""
	if r.Signal != nil {
		sig = *r.Signal
	}
	if r.Status == nsjail.StatusSignal && sig == "SIGXCPU" {
		return true, "status signal (SIGXCPU), not cpu_limit"
	}
	return false, fmt.Sprintf("status %s, signal %q (%s): want signal SIGXCPU", r.Status, sig, r.Message)
}

// denialFloodCalls is the denial flood's size: fewer than issue 11's
// 100,000, enough to show whether the denials are bounded.
const denialFloodCalls = 5000

// maxDenialEntries is the most seccomp_denials entries a bounded Result
// may hold.
const maxDenialEntries = 1024

// denialsJudge: sbx returned on time, and the Result's seccomp_denials is
// bounded yet counts every call.
func denialsJudge(o *Outcome) (bool, string) {
	r := o.Result
	m, has := outMap(o)
	if !has {
		return noOutput(o)
	}
	total := 0
	for _, d := range r.SeccompDenials {
		total += d.Count
	}
	n := len(r.SeccompDenials)
	switch {
	case r.Status != nsjail.StatusOK:
		return false, fmt.Sprintf("status %s (%s)", r.Status, r.Message)
	case n > maxDenialEntries:
		return false, fmt.Sprintf("seccomp_denials holds %d entries for %s distinct syscalls: unbounded", n, m["calls"])
	case fmt.Sprint(total) != m["refused"]:
		return false, fmt.Sprintf("seccomp_denials counts %d calls, the payload had %s refused", total, m["refused"])
	}
	return true, fmt.Sprintf("%s distinct syscalls refused, reported in %d entries", m["calls"], n)
}

// proxyFloodCalls and proxyFloodMethod size the proxy flood: 12 MB of
// request methods, which the supervisor must not keep.
const (
	proxyFloodCalls  = 200
	proxyFloodMethod = 60000
	// maxRecordBytes bounds the bytes the Result's network records may
	// hold after the flood: a small fixed amount, whatever was sent.
	maxRecordBytes = 256 << 10
)

// proxyJudge: the network records the supervisor kept (and reports)
// hold a small fixed number of bytes, however large the methods sent.
func proxyJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has {
		return noOutput(o)
	}
	var b int
	for _, a := range o.Result.Network {
		b += len(a.Method) + len(a.Host) + len(a.Reason) + len(a.Error) + len(a.Addr)
	}
	d := fmt.Sprintf("sent %s bytes of methods; %d records of %d bytes kept", m["sent"], len(o.Result.Network), b)
	if rss := o.Host["supervisor_rss_growth"]; rss != "" {
		d += "; supervisor peak RSS grew " + rss
	}
	if m["sent"] == "0" {
		return false, "the payload could not reach the proxy: " + d
	}
	return b <= maxRecordBytes, d
}

// hardlink amplification: one file of hardlinkMiB MiB and hardlinkLinks
// links, 404 MiB to a consumer if each link came out as a file.
const (
	hardlinkMiB   = 4
	hardlinkLinks = 100
)

// hardlinkJudge: what a consumer reading every file of --output-dir
// reads stays within the profile's output cap (outputs.max_bytes).
func hardlinkJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has {
		return noOutput(o)
	}
	limit := nsjail.DefaultOutputSpec().MaxBytes
	d := fmt.Sprintf("%s logical bytes in the workspace, %d bytes to read in --output-dir (cap %d)", m["logical_bytes"], o.OutputBytes, limit)
	return o.OutputBytes <= limit, d
}

// inotifyJudge: the host's own inotify_init1 still works while the
// payload holds every instance it could get.
func inotifyJudge(o *Outcome) (bool, string) {
	m, has := outMap(o)
	if !has {
		return noOutput(o)
	}
	h := o.Host["inotify_init1"]
	d := fmt.Sprintf("the payload holds %s instances; the host's inotify_init1: %s", m["held"], h)
	return h == "ok", d
}

// Attempts are the escape attempts of `sbx doctor --self-test`, in order.
func Attempts() []Attempt {
	denied := func(k, v string) bool { return refused(v) }
	return []Attempt{
		{Name: "seccomp (standard)", Payload: "seccomp.py", Profile: "standard", Judge: seccompJudge,
			Blocked: "ptrace, mount, unshare(CLONE_NEWUSER), bpf, keyctl, kexec, io_uring_setup and the rest fail, each refused by the filter"},
		{Name: "seccomp (strict)", Payload: "seccomp.py", Profile: "strict", Judge: seccompJudge,
			Blocked: "the same calls fail under strict's allowlist, each refused by the filter"},
		{Name: "fd leaks", Payload: "fds.py", Profile: "standard", Judge: fdsJudge,
			Blocked: "the payload starts with fds 0, 1 and 2 only"},
		{Name: "/proc", Payload: "proc.py", Profile: "standard", Judge: judgeAll(procJudge),
			Blocked: "/proc/kcore, iomem, timer_list, sched_debug and keys are unreadable or empty; sysrq-trigger and /proc/sys files do not open for writing (or are /dev/null)"},
		{Name: "host loopback", Payload: "connect.py", Args: []string{"127.0.0.1"}, Profile: "standard", Host: HostListener, Judge: connectJudge,
			Blocked: "a connect to a listener sbx opened on the host's 127.0.0.1 fails, and the listener sees nothing"},
		{Name: "cloud metadata", Payload: "connect.py", Args: []string{"169.254.169.254", "80"}, Profile: "standard", Judge: connectJudge,
			Blocked: "a connect to 169.254.169.254:80 fails (no route out of the sandbox)"},
		{Name: "read-only root", Payload: "rootfs.py", Profile: "standard", Judge: judgeAll(denied),
			Blocked: "creating or appending to files in /, /usr, /etc, /dev and /proc fails"},
		{Name: "capabilities", Payload: "status.py", Profile: "standard", Judge: statusJudge,
			Blocked: "every capability set is empty, NoNewPrivs is 1 and Seccomp is 2 (filter)"},
		{Name: "nested userns", Payload: "userns.py", Profile: "standard", Judge: judgeAll(denied),
			Blocked: "unshare(CLONE_NEWUSER) and clone(CLONE_NEWUSER) fail"},
		{Name: "prlimit init", Payload: "prlimit.py", Profile: "standard", Judge: prlimitJudge,
			Blocked: "prlimit(1, RLIMIT_NOFILE, ...) cannot set the init's limit (refused, or no such process)"},
		{Name: "kill init", Payload: "killinit.py", Profile: "standard", Judge: killInitJudge,
			Blocked: "kill(1, SIGTERM) and kill(1, SIGKILL) have no effect: the payload goes on and the run ends with status ok"},
		{Name: "forged SIGXCPU", Payload: "sigxcpu.py", Profile: "standard", Judge: sigxcpuJudge,
			Blocked: "a SIGXCPU the payload sends itself gives status signal, not cpu_limit"},
		{Name: "denial flood", Payload: "denials.py", Args: []string{fmt.Sprint(denialFloodCalls)}, Profile: "strict", Judge: denialsJudge,
			Blocked: fmt.Sprintf("%d distinct denied syscalls: sbx returns on time, and seccomp_denials has at most %d entries that count every call", denialFloodCalls, maxDenialEntries)},
		{Name: "proxy method flood", Payload: "proxyflood.py", Args: []string{fmt.Sprint(proxyFloodCalls), fmt.Sprint(proxyFloodMethod)}, Profile: "standard", AllowHost: "selftest.invalid", Judge: proxyJudge,
			Blocked: fmt.Sprintf("%d requests with %d-byte methods leave at most %d bytes of network records in the supervisor", proxyFloodCalls, proxyFloodMethod, maxRecordBytes)},
		{Name: "hardlink amplification", Payload: "hardlinks.py", Args: []string{fmt.Sprint(hardlinkMiB), fmt.Sprint(hardlinkLinks)}, Profile: "standard", Host: HostOutputDir, Judge: hardlinkJudge,
			Blocked: fmt.Sprintf("a %d MiB file with %d hard links gives --output-dir at most the output cap to read, not %d MiB", hardlinkMiB, hardlinkLinks, hardlinkMiB*(hardlinkLinks+1))},
		{Name: "inotify quota", Payload: "inotify.py", Profile: "standard", Host: HostInotify, Judge: inotifyJudge,
			Blocked: "while the payload holds all the inotify instances it can get, inotify_init1 on the host still works"},
	}
}

// SelfTest runs every attempt through run and judges it.
func SelfTest(attempts []Attempt, run func(Attempt) *Outcome) *SelfTestReport {
	r := &SelfTestReport{OK: true}
	if rep := Run(nil); rep != nil {
		r.Kernel, r.UID = rep.Kernel, rep.UID
	}
	for _, a := range attempts {
		f := Judge(a, run(a))
		if !f.Blocked {
			r.OK = false
		}
		r.Findings = append(r.Findings, f)
	}
	return r
}
