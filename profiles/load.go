package profiles

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/sbx-sandbox/sbx/internal/oserr"
)

//go:embed *.toml
var builtin embed.FS

// OriginKind says what set a value.
type OriginKind string

const (
	FromDefault OriginKind = "default" // Defaults()
	FromBuiltin OriginKind = "builtin" // a built-in profile file
	FromFile    OriginKind = "file"    // a user's profile file
	FromFlag    OriginKind = "flag"    // a command-line flag
)

// Origin is where one value of an effective profile came from.
type Origin struct {
	Kind OriginKind `json:"kind"`
	// Name is the built-in's name, the file's path as given (an extended
	// file's path is joined to its extender's directory), or the flag
	// with its dashes ("--memory").
	Name string `json:"name,omitempty"`
	Line int    `json:"line,omitempty"`
	// Text is a flag's value as the user typed it, so that an error
	// quotes "1.5", not the "2" (bytes) it was read as.
	Text string `json:"-"`
}

// String is how `sbx profile show` prints an origin: "default",
// "strict:9", "./custom.toml:4", "flag --memory".
func (o Origin) String() string {
	switch o.Kind {
	case FromDefault:
		return "default"
	case FromFlag:
		return "flag " + o.Name
	case FromRequest:
		return "request " + o.Name
	}
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.Name, o.Line)
	}
	return o.Name
}

// Error is one problem of a profile or a flag, saying where it is.
type Error struct {
	Origin Origin
	// Msg names the key and the value: "limits.memory = \"12Q\": not a
	// size (...)", "unknown key limits.wall_tme"; for a flag it starts
	// with the flag: "--memory \"12Q\": not a size (...)".
	Msg string
}

func newError(o Origin, format string, args ...any) *Error {
	return &Error{Origin: o, Msg: fmt.Sprintf(format, args...)}
}

// Error formats the problem as "profile FILE: line N: MSG" (built-in
// profiles are named by their name), or MSG alone for a flag.
func (e *Error) Error() string {
	switch {
	case e.Origin.Kind == FromFlag, e.Origin.Kind == FromRequest:
		return e.Msg
	case e.Origin.Kind == FromDefault:
		return "built-in defaults: " + e.Msg
	case e.Origin.Line > 0:
		return fmt.Sprintf("profile %s: line %d: %s", e.Origin.Name, e.Origin.Line, e.Msg)
	}
	return fmt.Sprintf("profile %s: %s", e.Origin.Name, e.Msg)
}

// Errors is every problem found, in file order. Its Error() is one line
// (the first problem, and how many more) because sbx exec promises one
// line on stderr; `sbx profile validate` prints each.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", es[0].Error(), len(es)-1)
}

func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// orNil returns es as an error, or a nil error (not a nil Errors).
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Names lists the built-in profiles.
func Names() []string {
	ents, _ := builtin.ReadDir(".")
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".toml"))
	}
	sort.Strings(names)
	return names
}

// IsFile tells whether a --profile value names a file (it has a slash or
// ends in .toml) rather than a built-in profile.
func IsFile(ref string) bool {
	return strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".toml")
}

// Load returns the effective profile ref names — a built-in name, or a
// file (see IsFile) — with what it extends merged in and every value
// checked. Errors are Errors. Loading a built-in reads no file.
func Load(ref string) (*Profile, error) {
	return (&loader{readFile: readProfileFile}).load(ref)
}

// maxFileSize bounds a profile file: --profile /dev/zero must fail, not
// eat the memory.
const maxFileSize = 1 << 20

func readProfileFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, errText("larger than 1M: not a profile")
	}
	return data, nil
}

// maxExtends bounds an extends chain. Cycles are caught by path, but a
// chain through a symlinked directory ("x/a.toml" with x -> .) makes new
// paths forever.
const maxExtends = 16

// loader reads profiles; tests and the fuzzer give it their own files.
type loader struct {
	readFile func(path string) ([]byte, error)
}

// source is one profile of an extends chain.
type source struct {
	origin Origin // Kind FromBuiltin or FromFile, Name as shown; Line 0
	id     string // "builtin:NAME" or the absolute path, for cycles
	path   string // the file to read; "" for a built-in
}

func (l *loader) load(ref string) (*Profile, error) {
	if ref == "" {
		ref = DefaultName
	}
	src, err := resolve(ref, "")
	if err != nil {
		return nil, Errors{newError(src.origin, "%v", err)}
	}
	data, err := l.read(src)
	if err != nil {
		return nil, Errors{newError(src.origin, "%v", err)}
	}
	p, errs := l.loadChain(src, data, nil)
	// Validate even after errors, to report every problem in one go: a
	// key that could not be read kept its inherited value, which is valid.
	var verrs Errors
	errors.As(p.Validate(), &verrs)
	if errs = append(errs, verrs...); len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	p.Name = ref
	if IsFile(ref) {
		p.Name = strings.TrimSuffix(filepath.Base(ref), ".toml")
	}
	return p, nil
}

// sortErrors puts errors of files in file order (by file, then line),
// and errors of flags after them in schema order.
func sortErrors(errs Errors) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Origin, errs[j].Origin
		if a.Kind == FromFlag || b.Kind == FromFlag {
			return a.Kind != FromFlag && b.Kind == FromFlag
		}
		return a.Name < b.Name || a.Name == b.Name && a.Line < b.Line
	})
}

// resolve says where ref is: a built-in, or a file relative to dir (the
// extending file's directory; "" for the working directory).
func resolve(ref, dir string) (source, error) {
	if !IsFile(ref) {
		src := source{origin: Origin{Kind: FromBuiltin, Name: ref}, id: "builtin:" + ref}
		if _, err := fs.Stat(builtin, ref+".toml"); err != nil {
			return src, fmt.Errorf("no such built-in profile (have: %s; a file path needs a slash or a .toml suffix)", strings.Join(Names(), ", "))
		}
		return src, nil
	}
	path := ref
	if dir != "" && !filepath.IsAbs(ref) {
		path = filepath.Join(dir, ref)
	}
	id, err := filepath.Abs(path)
	if err != nil {
		id = path
	}
	return source{origin: Origin{Kind: FromFile, Name: displayPath(path)}, id: id, path: path}, nil
}

// displayPath is a file name as errors and `sbx profile show` print it:
// as it is, or Go-quoted when it holds control characters or invalid
// UTF-8, so that every message stays one printable line.
func displayPath(p string) string {
	if utf8.ValidString(p) && !strings.ContainsFunc(p, unicode.IsControl) {
		return p
	}
	return strconv.Quote(p)
}

func (l *loader) read(src source) ([]byte, error) {
	if src.path == "" {
		return builtin.ReadFile(src.origin.Name + ".toml")
	}
	data, err := l.readFile(src.path)
	// "open ./x.toml: no such file": the path is already named.
	return data, oserr.WithoutPath(err)
}

// loadChain reads one profile over what it extends. It goes on after
// errors, so that one run reports as many as it can find.
func (l *loader) loadChain(src source, data []byte, chain []source) (*Profile, Errors) {
	doc, errs := parseDocument(data, src.origin)
	var p *Profile
	var baseErrs Errors
	if e := doc.extends; e != nil && e.val.kind == unstable.String && e.val.text != "" {
		p, baseErrs = l.extend(src, e, chain)
	}
	if p == nil {
		d := Defaults()
		p = &d
	}
	errs = append(errs, p.apply(doc, src.origin)...)
	p.chain = append([]string{src.origin.Name}, p.chain...)
	if src.path != "" {
		p.files = append([]string{src.path}, p.files...)
	}
	return p, append(errs, baseErrs...)
}

// extend loads the profile that src's "extends" entry e names.
func (l *loader) extend(src source, e *entry, chain []source) (*Profile, Errors) {
	at := src.origin
	at.Line = e.line
	fail := func(format string, args ...any) (*Profile, Errors) {
		return nil, Errors{newError(at, "extends = %s: %s", quoteTOML(e.val.text), fmt.Sprintf(format, args...))}
	}
	ref := e.val.text
	if src.origin.Kind == FromBuiltin && IsFile(ref) {
		return fail("a built-in profile can only extend another built-in")
	}
	chain = append(chain[:len(chain):len(chain)], src)
	if len(chain) >= maxExtends {
		return fail("more than %d profiles extend each other", maxExtends)
	}
	dir := ""
	if src.path != "" {
		dir = filepath.Dir(src.path)
	}
	base, err := resolve(ref, dir)
	if err != nil {
		return fail("%v", err)
	}
	for i, c := range chain {
		if c.id == base.id {
			names := make([]string, 0, len(chain)-i+1)
			for _, c := range chain[i:] {
				names = append(names, c.origin.Name)
			}
			return fail("cycle: %s -> %s", strings.Join(names, " -> "), base.origin.Name)
		}
	}
	data, err := l.read(base)
	if err != nil {
		if base.origin.Name != ref {
			return fail("%s: %v", base.origin.Name, err)
		}
		return fail("%v", err)
	}
	return l.loadChain(base, data, chain)
}

// apply sets every entry of doc over p, recording where each value came
// from. Lists replace what p had; env merges name by name.
func (p *Profile) apply(doc document, o Origin) Errors {
	var errs Errors
	for _, e := range doc.entries {
		at := o
		at.Line = e.line
		if isEnvKey(e.key) {
			if e.val.kind != unstable.String {
				errs = append(errs, newError(at, "%s: want a string, got %s", e.key, describe(e.val.kind)))
				continue
			}
			if p.Env == nil {
				p.Env = map[string]string{}
			}
			p.Env[envName(e.key)] = e.val.text
		} else if err := lookupField(e.key).setTOML(p, e.val); err != nil {
			var ve valueError
			if errors.As(err, &ve) {
				errs = append(errs, newError(at, "%s = %s: %v", e.key, e.val.literal(), ve.error))
			} else {
				errs = append(errs, newError(at, "%s: %v", e.key, err))
			}
			continue
		}
		p.setOrigin(e.key, at)
	}
	return errs
}

func (p *Profile) setOrigin(key string, o Origin) {
	if p.origins == nil {
		p.origins = make(map[string]Origin, len(fields))
	}
	p.origins[key] = o
}

// Origin says where the value of key came from ("limits.memory",
// "env.NAME").
func (p *Profile) Origin(key string) Origin {
	if o, ok := p.origins[key]; ok {
		return o
	}
	return Origin{Kind: FromDefault}
}

// Chain lists the profiles that were read: the profile itself first,
// then what it extends, and so on.
func (p *Profile) Chain() []string { return p.chain }

// Files lists the profile files that were read, in Chain's order, as
// they were opened: paths to open again, where Chain's are for display.
func (p *Profile) Files() []string { return p.files }

// DisplayPath is a file name as the profile's errors print it
// (displayPath).
func DisplayPath(path string) string { return displayPath(path) }
