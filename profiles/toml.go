package profiles

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/sbx-sandbox/sbx/internal/units"
)

// Why go-toml's parser and not its Decoder: the Decoder stops at the first
// type error, loses the line of errors from custom unmarshalers, and cannot
// say which keys a file set. Profiles need all three — every error with
// its key and line, and the source of every value — so sbx walks the
// parser's AST (the same parser the Decoder uses) and sets each key through
// the field table. Syntax, string escapes and number literals stay
// go-toml's business.

// tval is one TOML value as the parser gave it. Numbers keep their source
// text until the target type is known (a size, a duration, an integer...).
type tval struct {
	kind unstable.Kind
	text string // a string's contents, or a number's or boolean's source text
	list []tval // an array's elements (one level: no key takes nested arrays)
}

// entry is one key = value of a document, flattened: [limits] memory = 1
// and limits = { memory = 1 } are both the entry limits.memory.
type entry struct {
	key  string
	line int
	val  tval
}

// document is a parsed profile file.
type document struct {
	entries []entry
	// extends is the entry of the "extends" key, if any.
	extends *entry
}

// docParser turns one file into a document, collecting every error.
type docParser struct {
	p      unstable.Parser
	data   []byte
	lines  []int // offsets of the newlines of data, for line numbers
	doc    document
	errs   Errors
	origin Origin // the file, for errors; Line is set per error
	seen   map[string]int
	// table is the current [table] header's key ("" at the top); skip is
	// set under a header that is not a table of the schema, whose keys
	// were reported once with the header.
	table string
	skip  bool
	// hints counts the "did you mean" hints given: past a few dozen
	// unknown keys the file is not a typo, and hints would cost time.
	hints int
}

func parseDocument(data []byte, origin Origin) (document, Errors) {
	ps := &docParser{data: data, origin: origin, seen: make(map[string]int, len(fields))}
	for i, c := range data {
		if c == '\n' {
			ps.lines = append(ps.lines, i)
		}
	}
	ps.p.Reset(data)
	for ps.p.NextExpression() {
		ps.expression(ps.p.Expression())
	}
	if err := ps.p.Error(); err != nil {
		line := 0
		if pe, ok := err.(*unstable.ParserError); ok {
			line = ps.lineOf(pe.Highlight)
		}
		ps.errorf(line, "invalid TOML: %s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	for i := range ps.doc.entries {
		if ps.doc.entries[i].key == "extends" {
			ps.doc.extends = &ps.doc.entries[i]
		}
	}
	return ps.doc, ps.errs
}

func (ps *docParser) errorf(line int, format string, args ...any) {
	o := ps.origin
	o.Line = line
	ps.errs = append(ps.errs, newError(o, format, args...))
}

// line returns the 1-based line of a byte offset.
func (ps *docParser) line(off int) int {
	return sort.SearchInts(ps.lines, off) + 1
}

// lineOf returns the line of a subslice of the data, or 0 if it is not
// one (a parser error's highlight should be; never trust it to be).
func (ps *docParser) lineOf(b []byte) int {
	off := cap(ps.data) - cap(b)
	if b == nil || off < 0 || off > len(ps.data) {
		return 0
	}
	return ps.line(off)
}

// keyOf returns the dotted key of a KeyValue, Table or ArrayTable node and
// the line it starts on.
func (ps *docParser) keyOf(n *unstable.Node, prefix string) (string, int) {
	key, line := prefix, 0
	it := n.Key()
	for it.Next() {
		k := it.Node()
		if line == 0 {
			line = ps.line(int(k.Raw.Offset))
		}
		key = joinKey(key, string(k.Data))
	}
	return key, line
}

func (ps *docParser) expression(e *unstable.Node) {
	switch e.Kind {
	case unstable.Table, unstable.ArrayTable:
		key, line := ps.keyOf(e, "")
		ps.table, ps.skip = "", true
		what := "a table"
		if e.Kind == unstable.ArrayTable {
			what = "an array of tables"
		}
		switch {
		case e.Kind == unstable.Table && isTable(key):
			if first, dup := ps.seen["["+key+"]"]; dup {
				ps.errorf(line, "[%s]: table already defined on line %d", key, first)
				return
			}
			ps.seen["["+key+"]"] = line
			ps.table, ps.skip = key, false
		default:
			ps.wrongKey(key, line, what)
		}
	case unstable.KeyValue:
		if ps.skip {
			return
		}
		key, line := ps.keyOf(e, ps.table)
		ps.value(key, line, e.Value())
	}
}

// value records key = v, descending into inline tables.
func (ps *docParser) value(key string, line int, v *unstable.Node) {
	if v.Kind == unstable.InlineTable {
		if !isTable(key) {
			ps.wrongKey(key, line, "a table")
			return
		}
		it := v.Children()
		for it.Next() {
			kv := it.Node()
			k, l := ps.keyOf(kv, key)
			ps.value(k, l, kv.Value())
		}
		return
	}
	if lookupField(key) == nil && !isEnvKey(key) {
		ps.wrongKey(key, line, describe(v.Kind))
		return
	}
	if first, dup := ps.seen[key]; dup {
		ps.errorf(line, "%s: already set on line %d", key, first)
		return
	}
	ps.seen[key] = line
	ps.doc.entries = append(ps.doc.entries, entry{key: key, line: line, val: toTval(v, 0)})
}

// wrongKey reports a key that is not in the schema, or a table given where
// a value belongs and the other way round.
func (ps *docParser) wrongKey(key string, line int, got string) {
	switch {
	case lookupField(key) != nil:
		ps.errorf(line, "%s: want %s, got %s", key, lookupField(key).want(), got)
	case isEnvKey(key):
		ps.errorf(line, "%s: want a string, got %s", key, got)
	case isTable(key):
		ps.errorf(line, "%s: want a table, got %s", key, got)
	default:
		hint := ""
		if ps.hints < 50 {
			ps.hints++
			hint = suggest(key)
		}
		ps.errorf(line, "unknown key %s%s", key, hint)
	}
}

// isEnvKey tells whether key names one environment variable: env.NAME,
// with NAME a single (possibly quoted) key part.
func isEnvKey(key string) bool {
	name, ok := strings.CutPrefix(key, envPrefix)
	if !ok || name == "" {
		return false
	}
	if name[0] == '"' {
		_, err := strconv.Unquote(name)
		return err == nil
	}
	return !strings.Contains(name, ".")
}

// envName returns NAME of the key env.NAME.
func envName(key string) string {
	name := strings.TrimPrefix(key, envPrefix)
	if u, err := strconv.Unquote(name); err == nil {
		return u
	}
	return name
}

// joinKey appends one key part, quoted when it is not a bare TOML key, so
// that the key reads back as the same path: env."A.B".
func joinKey(prefix, part string) string {
	if !isBareKey(part) {
		part = quoteTOML(part)
	}
	if prefix == "" {
		return part
	}
	return prefix + "." + part
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// suggest names the key that was probably meant: the same name in another
// table (memory → limits.memory), or one within two edits (a typo).
func suggest(key string) string {
	if len(key) > 64 {
		return ""
	}
	last := key[strings.LastIndexByte(key, '.')+1:]
	for _, f := range fields {
		if f.key[strings.LastIndexByte(f.key, '.')+1:] == last {
			return " (did you mean " + f.key + "?)"
		}
	}
	cands := make([]string, 0, len(fields)+len(tables))
	for _, f := range fields {
		cands = append(cands, f.key)
	}
	cands = append(cands, tables...)
	if best := Closest(key, cands); best != "" {
		return " (did you mean " + best + "?)"
	}
	return ""
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Closest is the candidate within two edits of word (the nearest, the
// first of equals), or "": the "did you mean" of profile keys, also used
// by the CLI for its flags and commands.
func Closest(word string, cands []string) string {
	if len(word) > 64 {
		return ""
	}
	best, bestDist := "", 3
	for _, c := range cands {
		// The distance is at least the difference in length.
		if abs(len(c)-len(word)) < bestDist {
			if d := editDistance(word, c); d < bestDist {
				best, bestDist = c, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func toTval(n *unstable.Node, depth int) tval {
	v := tval{kind: n.Kind}
	switch n.Kind {
	case unstable.String, unstable.Integer, unstable.Float, unstable.Bool:
		v.text = string(n.Data)
	case unstable.Array:
		if depth > 0 {
			return v
		}
		it := n.Children()
		for it.Next() {
			v.list = append(v.list, toTval(it.Node(), depth+1))
		}
	}
	return v
}

// describe names a TOML type the way errors say it: "got an integer".
func describe(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "a table"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "a date or time"
	}
	return "a " + k.String()
}

// literal prints a parsed value back the way it was written, for errors.
func (v tval) literal() string {
	switch v.kind {
	case unstable.String:
		return quoteTOML(v.text)
	case unstable.Integer, unstable.Float, unstable.Bool:
		return v.text
	case unstable.Array:
		parts := make([]string, len(v.list))
		for i, e := range v.list {
			parts[i] = e.literal()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return describe(v.kind)
}

// setTOML stores a parsed value in the field, or says why it cannot.
// The error is a *valueError when the type was right but the value not.
func (f *field) setTOML(p *Profile, v tval) error {
	switch ptr := f.ptr(p).(type) {
	case *string:
		if v.kind != unstable.String {
			return f.typeError(v)
		}
		*ptr = v.text
	case *units.Size:
		var n int64
		var err error
		switch v.kind {
		case unstable.String:
			n, err = units.ParseSize(v.text)
		case unstable.Integer:
			if n, err = parseInt(v.text); err == nil {
				err = units.CheckSize(n)
			}
		default:
			return f.typeError(v)
		}
		if err != nil {
			return valueError{err}
		}
		*ptr = units.Size(n)
	case *units.Duration:
		var secs float64
		switch v.kind {
		case unstable.String:
			d, err := units.ParseDuration(v.text)
			if err != nil {
				return valueError{err}
			}
			*ptr = units.Duration(d)
			return nil
		case unstable.Integer:
			n, err := parseInt(v.text)
			if err != nil {
				return valueError{err}
			}
			secs = float64(n)
		case unstable.Float:
			x, err := parseFloat(v.text)
			if err != nil {
				return valueError{err}
			}
			secs = x
		default:
			return f.typeError(v)
		}
		d, err := units.Seconds(secs)
		if err != nil {
			return valueError{err}
		}
		*ptr = units.Duration(d)
	case *int64, *int:
		if v.kind != unstable.Integer {
			return f.typeError(v)
		}
		n, err := parseInt(v.text)
		if err == nil {
			err = f.setInt(p, n)
		}
		if err != nil {
			return valueError{err}
		}
	case *float64:
		var x float64
		var err error
		switch v.kind {
		case unstable.Integer:
			var n int64
			n, err = parseInt(v.text)
			x = float64(n)
		case unstable.Float:
			x, err = parseFloat(v.text)
		default:
			return f.typeError(v)
		}
		if err != nil {
			return valueError{err}
		}
		*ptr = x
	case *bool:
		if v.kind != unstable.Bool {
			return f.typeError(v)
		}
		*ptr = v.text == "true"
	case *[]string:
		if v.kind != unstable.Array {
			return f.typeError(v)
		}
		list := make([]string, 0, len(v.list))
		for _, e := range v.list {
			if e.kind != unstable.String {
				return errText("want a list of strings, got " + describe(e.kind) + " in the list")
			}
			list = append(list, e.text)
		}
		*ptr = list
	}
	return nil
}

func (f *field) typeError(v tval) error {
	return errText("want " + f.want() + ", got " + describe(v.kind))
}

// valueError marks an error about a value of the right type, so that the
// message shows the value: limits.memory = "12Q": not a size (...).
type valueError struct{ error }

// parseInt reads a TOML integer literal (the parser has checked its form:
// 1_000, 0x1F, 0o17, 0b101, +5). Go's base-0 syntax accepts all of these.
func parseInt(text string) (int64, error) {
	n, err := strconv.ParseInt(text, 0, 64)
	if err != nil {
		return 0, errNotInteger(err)
	}
	return n, nil
}

// parseFloat reads a TOML float literal; inf and nan are refused, since no
// key means anything by them.
func parseFloat(text string) (float64, error) {
	x, err := strconv.ParseFloat(strings.ReplaceAll(text, "_", ""), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, errText("not a finite number")
	}
	return x, nil
}

// formatTOML prints a value as a TOML literal (what `sbx profile show`
// prints and what a profile file may contain).
func formatTOML(v any) string {
	switch v := v.(type) {
	case string:
		return quoteTOML(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quoteTOML(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return ""
}

// quoteTOML quotes s as a TOML basic string. Go's %q is close but writes
// \x.. escapes, which TOML 1.0 does not have.
func quoteTOML(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789ABCDEF"[r>>4])
			b.WriteByte("0123456789ABCDEF"[r&0xf])
		case r == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
