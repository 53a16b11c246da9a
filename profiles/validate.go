package profiles

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-sandbox/sbx/netproxy/allowlist"
	"github.com/sbx-sandbox/sbx/nsjail/spec"
	"github.com/sbx-sandbox/sbx/rootfs"
	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// Validate checks every value of the effective profile; each problem
// names the key and where its value came from (file and line, or flag).
// It returns Errors, or nil.
func (p *Profile) Validate() error {
	var errs Errors
	for i := range fields {
		f := &fields[i]
		if reason := f.validate(p); reason != "" {
			errs = append(errs, p.problem(f.key, f.value(p), reason))
		}
	}
	for _, name := range sortedKeys(p.Env) {
		key := joinKey("env", name)
		switch {
		case strings.ContainsAny(name, "=\x00"):
			errs = append(errs, p.problem(key, p.Env[name], `a variable name must not contain "=" or a NUL byte`))
		case strings.ContainsRune(p.Env[name], 0):
			errs = append(errs, p.problem(key, p.Env[name], "must not contain a NUL byte"))
		}
	}
	sortErrors(errs)
	return errs.orNil()
}

// validate returns why f's value is refused, or "".
func (f *field) validate(p *Profile) string {
	if n, ok := f.number(p); ok {
		switch {
		case f.hasMax && (n < f.min || n > f.max):
			return fmt.Sprintf("must be within %s..%s", f.formatBound(f.min), f.formatBound(f.max))
		case n < f.min:
			return "must be at least " + f.formatBound(f.min)
		}
	}
	if f.kind == kindEnum {
		if v := *f.ptr(p).(*string); !contains(f.enum, v) {
			return "want one of " + quoteList(f.enum)
		}
	}
	if f.kind == kindList {
		// A set, not a scan of the entries before: a 1M file holds lists
		// of 100k entries.
		seen := map[string]bool{}
		for _, v := range *f.ptr(p).(*[]string) {
			if f.enum != nil && !contains(f.enum, v) {
				return fmt.Sprintf("%s: want one of %s", quoteTOML(v), quoteList(f.enum))
			}
			if seen[v] {
				return quoteTOML(v) + ": listed twice"
			}
			seen[v] = true
		}
	}
	if f.check != nil {
		return f.check(p)
	}
	return ""
}

// problem formats a refused value by where it came from: the file's key
// and line, or the flag as the user typed it.
func (p *Profile) problem(key string, value any, reason string) *Error {
	o := p.Origin(key)
	if o.Kind == FromFlag || o.Kind == FromRequest {
		text := o.Text
		if text == "" {
			text = flagText(value)
		}
		return newError(o, "%s %s: %s", o.Name, strconv.Quote(text), reason)
	}
	return newError(o, "%s = %s: %s", key, formatTOML(value), reason)
}

func checkDescription(p *Profile) string {
	// Control characters would also let a profile write terminal escapes.
	if strings.ContainsFunc(p.Description, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
		return "must be one line of text (`sbx profile list` prints it)"
	}
	return ""
}

func checkCPUs(p *Profile) string {
	if v := p.Limits.CPUs; !(v > 0 && v <= maxCPUs) {
		return fmt.Sprintf("must be more than 0 and at most %d", maxCPUs)
	}
	return ""
}

func isCleanAbs(s string) bool {
	return path.IsAbs(s) && path.Clean(s) == s
}

// checkImage refuses an image with a rootfs (two roots) and names that
// cannot be a store name or a reference.
func checkImage(p *Profile) string {
	switch {
	case p.Image == "":
		return ""
	case p.Filesystem.Rootfs != "":
		return "not with filesystem.rootfs (" + p.Filesystem.Rootfs + "): the image is the root"
	case len(p.Image) > 512 || strings.ContainsAny(p.Image, " \t\n\x00"):
		return "not an image name or reference"
	}
	return ""
}

func checkRootfs(p *Profile) string {
	if r := p.Filesystem.Rootfs; r != "" && !isCleanAbs(r) {
		return "must be a clean absolute path (or empty for the host's /usr)"
	}
	return ""
}

// workspaceTops are the top-level directories the workspace may be in:
// ones the mount plan creates itself (rootfs.synthesized) and does not use
// for something else (/etc, /dev, /proc, /tmp). Anywhere else would mount
// over the read-only rootfs. A test checks each against rootfs.Plan.
var workspaceTops = []string{"workspace", "home", "root", "srv", "mnt", "media", "var", "run", "boot"}

func checkWorkspace(p *Profile) string {
	w := p.Filesystem.Workspace
	if !isCleanAbs(w) || w == "/" {
		return "must be a clean absolute path below /"
	}
	if top := strings.Split(w, "/")[1]; !contains(workspaceTops, top) {
		return "must lie in /" + strings.Join(workspaceTops, ", /") + " (elsewhere it would cover the rootfs or a directory the sandbox owns)"
	}
	return ""
}

// sandboxOwned are top-level directories the sandbox mounts itself; a
// read-only bind there would be hidden or would clash.
var sandboxOwned = []string{"proc", "dev", "etc", "tmp"}

func checkROBinds(p *Profile) string {
	ws := p.Filesystem.Workspace
	for _, b := range p.Filesystem.ROBinds {
		src, dst := rootfs.SplitBind(b)
		top := strings.Split(dst, "/")[1]
		switch {
		case !isCleanAbs(src) || src == "/" || !isCleanAbs(dst) || dst == "/":
			return quoteTOML(b) + ": want SRC[:DEST], each a clean absolute path below /"
		case contains(sandboxOwned, top):
			return fmt.Sprintf("%s: /%s is the sandbox's own: sbx mounts a fresh %s there, which would hide the bind or clash with it; bind at another path, e.g. %q",
				quoteTOML(b), top, ownedWhat[top], src+":/data")
		case dst == ws || strings.HasPrefix(dst, ws+"/") || strings.HasPrefix(ws, dst+"/"):
			return fmt.Sprintf("%s: overlaps the workspace %s, a fresh tmpfs mounted over it; bind at another path, e.g. %q, or copy files in with --file or --input-dir",
				quoteTOML(b), ws, src+":/data")
		}
	}
	return ""
}

// ownedWhat says what the sandbox mounts at each of sandboxOwned.
var ownedWhat = map[string]string{"proc": "procfs", "dev": "/dev (a few device nodes)", "etc": "/etc (passwd, hosts, resolv.conf)", "tmp": "tmpfs"}

// checkPreload accepts dotted module names, each once, as many as a warm
// sandbox's argv takes (nsjail.Warm).
func checkPreload(p *Profile) string {
	seen := map[string]bool{}
	for _, m := range p.Preload {
		if err := spec.CheckModuleName(m); err != nil {
			return quoteTOML(m) + ": not a module name: want dotted identifiers, e.g. \"numpy\" or \"matplotlib.pyplot\""
		}
		if seen[m] {
			return quoteTOML(m) + ": listed twice"
		}
		seen[m] = true
	}
	if len(p.Preload) > spec.MaxPreload {
		return fmt.Sprintf("%d modules: at most %d", len(p.Preload), spec.MaxPreload)
	}
	return ""
}

func checkAllow(p *Profile) string {
	// One grammar: the proxy's own parser decides what a pattern means.
	if _, err := allowlist.Parse(p.Network.Allow); err != nil {
		return err.Error()
	}
	// In a file, hosts with mode "none" are a mistake: the user meant to
	// reach them. --net none on a command line means "cut the network",
	// whatever the profile lists.
	if len(p.Network.Allow) > 0 && p.Network.Mode == NetworkNone && p.Origin("network.mode").Kind != FromFlag {
		return `hosts are listed but network.mode is "none" (set mode = "allow", or allow = [])`
	}
	return ""
}

// checkDomain checks dot-separated labels of letters, digits, '-' and the
// characters in extra, as RFC 1123 has them.
func checkDomain(s, extra string) string {
	if s == "" || len(s) > 253 {
		return "want a host name of 1-253 characters"
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return "each dot-separated part must have 1-63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "a part must not start or end with '-'"
		}
		for _, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || strings.ContainsRune(extra, c)
			if c == '*' {
				return "a wildcard must be the whole first part: *.example.com"
			}
			if !ok {
				return fmt.Sprintf("%q is not allowed in a host name", c)
			}
		}
	}
	return ""
}

func checkHostname(p *Profile) string {
	h := p.Sandbox.Hostname
	if h == "" || len(h) > 64 {
		// HOST_NAME_MAX: sethostname(2) refuses more.
		return "want 1-64 characters"
	}
	return checkDomain(h, "")
}

// Warnings lists what the profile turns off, each line naming the key,
// its value and where it was set. A profile with warnings is valid: the
// user may mean it, but must not be surprised by it.
func (p *Profile) Warnings() []string {
	var out []string
	warn := func(key string, value any, msg string) {
		out = append(out, fmt.Sprintf("%s = %s (%s): %s", key, formatTOML(value), p.Origin(key), msg))
	}
	if p.Seccomp.Policy == policyname.None {
		warn("seccomp.policy", p.Seccomp.Policy, "no syscall filter: the whole kernel interface is open to the payload, the usual way out of a sandbox")
	}
	if p.Landlock.Mode == LandlockOff {
		warn("landlock.mode", p.Landlock.Mode, "no Landlock ruleset: only the mounts keep the payload from writing outside the workspace and /tmp")
	}
	if p.Network.Mode == NetworkAllow {
		warn("network.mode", p.Network.Mode, "the payload can reach the hosts of network.allow through sbx's proxy")
	}
	if p.Sandbox.UID == 0 {
		warn("sandbox.uid", int64(0), "the payload runs as root inside its user namespace; it is still unprivileged on the host, but one layer of defence is gone")
	}
	for _, bind := range p.Filesystem.ROBinds {
		b, _ := rootfs.SplitBind(bind)
		switch {
		case under(b, "/home") || under(b, "/root"):
			warn("filesystem.ro_binds", p.Filesystem.ROBinds, quoteTOML(b)+" shows users' files (keys, tokens, history) to the payload")
		case under(b, "/run") || under(b, "/var/run"):
			warn("filesystem.ro_binds", p.Filesystem.ROBinds, quoteTOML(b)+" may hold daemons' sockets (docker.sock), which a read-only bind does not stop the payload from connecting to")
		}
	}
	return out
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
