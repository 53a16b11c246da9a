package profiles

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/rootfs"
)

// The reference parts of docs/profiles.md are generated from the schema in
// profile.go (toml tags and doc comments), the field table and the
// built-in profiles. To regenerate after changing any of them:
//
//	go generate ./profiles     (runs: go test -run ^TestDocsInSync$ -update)
var update = flag.Bool("update", false, "rewrite the generated parts of docs/profiles.md")

const docsPath = "../docs/profiles.md"

func TestDocsInSync(t *testing.T) {
	old, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]func() (string, error){
		"keys":      keysDoc,
		"builtins":  builtinsDoc,
		"flags":     func() (string, error) { return flagsDoc(), nil },
		"procmasks": func() (string, error) { return procMasksDoc(), nil },
	}
	doc := string(old)
	for name, gen := range blocks {
		text, err := gen()
		if err != nil {
			t.Fatalf("generating %s: %v", name, err)
		}
		doc, err = replaceBlock(doc, name, text)
		if err != nil {
			t.Fatal(err)
		}
	}
	if doc == string(old) {
		return
	}
	if *update {
		if err := os.WriteFile(docsPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", docsPath)
		return
	}
	t.Errorf("%s is out of date with the schema; run: go generate ./profiles\n%s", docsPath, firstDiff(string(old), doc))
}

// replaceBlock replaces the text between the markers of one generated
// block.
func replaceBlock(doc, name, text string) (string, error) {
	begin := "<!-- BEGIN GENERATED " + name + ": made from profiles/ by go generate ./profiles; do not edit -->\n"
	end := "<!-- END GENERATED " + name + " -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s: no block %q (want the line %q and, later, %q)", docsPath, name, strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + text + doc[j:], nil
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  doc:    %s\n  schema: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("the doc has %d lines, the schema gives %d", len(al), len(bl))
}

// keyDoc is one key (or table) of the schema as the doc shows it.
type keyDoc struct {
	key, typ, doc string
	table         bool
}

// schemaDocs walks the Profile struct of profile.go: toml tags give the
// keys, doc comments the meanings, the Go types the types.
func schemaDocs() ([]keyDoc, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "profile.go", nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	structs := map[string]*ast.StructType{}
	typeDocs := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
				typeDocs[ts.Name.Name] = oneParagraph(g.Doc.Text())
			}
		}
	}
	var out []keyDoc
	var walk func(typeName, prefix string) error
	walk = func(typeName, prefix string) error {
		st := structs[typeName]
		if st == nil {
			return fmt.Errorf("profile.go: no struct %s", typeName)
		}
		for _, fld := range st.Fields.List {
			if fld.Tag == nil || len(fld.Names) != 1 {
				continue
			}
			tag := reflect.StructTag(strings.Trim(fld.Tag.Value, "`")).Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			name := fld.Names[0].Name
			if id, ok := fld.Type.(*ast.Ident); ok && structs[id.Name] != nil {
				out = append(out, keyDoc{key: prefix + tag, doc: typeDocs[id.Name], table: true})
				if err := walk(id.Name, prefix+tag+"."); err != nil {
					return err
				}
				continue
			}
			doc := oneParagraph(fld.Doc.Text())
			if doc == "" {
				return fmt.Errorf("profile.go: field %s.%s (%s%s) has no doc comment", typeName, name, prefix, tag)
			}
			// "Memory is the memory limit" reads as "`memory` is ...".
			if rest, ok := strings.CutPrefix(doc, name+" "); ok {
				doc = "`" + tag + "` " + rest
			}
			typ, err := goTypeDoc(fld.Type)
			if err != nil {
				return fmt.Errorf("profile.go: field %s.%s: %v", typeName, name, err)
			}
			out = append(out, keyDoc{key: prefix + tag, typ: typ, doc: doc})
		}
		return nil
	}
	return out, walk("Profile", "")
}

func goTypeDoc(e ast.Expr) (string, error) {
	switch t := e.(type) {
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string", nil
		case "int", "int64":
			return "integer", nil
		case "float64":
			return "number", nil
		case "bool":
			return "boolean", nil
		}
	case *ast.SelectorExpr:
		switch t.Sel.Name {
		case "Size":
			return "size", nil
		case "Duration":
			return "duration", nil
		}
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && id.Name == "string" {
			return "list of strings", nil
		}
	case *ast.MapType:
		if id, ok := t.Value.(*ast.Ident); ok && id.Name == "string" {
			return "table of strings", nil
		}
	}
	return "", fmt.Errorf("no doc type for %T", e)
}

func oneParagraph(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func keysDoc() (string, error) {
	docs, err := schemaDocs()
	if err != nil {
		return "", err
	}
	d := Defaults()
	var b bytes.Buffer
	inTable := false
	header := "| key | type | default | meaning |\n|---|---|---|---|\n"
	for _, k := range docs {
		if k.table {
			fmt.Fprintf(&b, "\n### `[%s]`\n\n%s\n\n", k.key, k.doc)
			inTable = false
			continue
		}
		if k.typ == "table of strings" {
			// env: a table whose keys are the user's.
			fmt.Fprintf(&b, "\n### `[%s]`\n\n", k.key)
			inTable = false
		}
		if !inTable {
			if b.Len() == 0 {
				b.WriteString("\n### Top level\n\n")
			}
			b.WriteString(header)
			inTable = true
		}
		typ, def := k.typ, "`{}`"
		if f := lookupField(k.key); f != nil {
			def = "`" + formatTOML(f.value(&d)) + "`"
			if f.kind == kindEnum {
				typ = strings.Join(quoteAll(f.enum), " | ")
			}
			if f.kind == kindList && f.enum != nil {
				typ = "list of " + strings.Join(quoteAll(f.enum), ", ")
			}
		} else if k.key != "env" {
			return "", fmt.Errorf("key %s of the struct is not in the field table", k.key)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.key, cell(typ), cell(def), cell(k.doc))
	}
	b.WriteString("\n")
	return b.String(), nil
}

func quoteAll(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = "`" + quoteTOML(v) + "`"
	}
	return out
}

func builtinsDoc() (string, error) {
	names := Names()
	profs := make([]*Profile, len(names))
	for i, n := range names {
		p, err := Load(n)
		if err != nil {
			return "", err
		}
		profs[i] = p
	}
	var b bytes.Buffer
	b.WriteString("\n| key | " + strings.Join(names, " | ") + " |\n|---" + strings.Repeat("|---", len(names)) + "|\n")
	for i := range fields {
		f := &fields[i]
		if f.key == "description" {
			continue
		}
		row := "| `" + f.key + "` |"
		for _, p := range profs {
			row += " `" + cell(formatTOML(f.value(p))) + "` |"
		}
		b.WriteString(row + "\n")
	}
	b.WriteString("\n")
	return b.String(), nil
}

func flagsDoc() string {
	var b bytes.Buffer
	b.WriteString("\n| flag | sets | meaning |\n|---|---|---|\n")
	for _, f := range Flags {
		name := "--" + f.Name
		if f.IsList() {
			name += " (comma list, repeatable)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", name, f.Key, cell(strings.ReplaceAll(f.Usage, "`", "")))
	}
	b.WriteString("\n")
	return b.String()
}

// TestSchemaDocsComplete makes the generator itself fail loudly: every
// key of the field table appears in the struct walk, in the same order.
func TestSchemaDocsComplete(t *testing.T) {
	docs, err := schemaDocs()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range docs {
		if !k.table {
			keys = append(keys, k.key)
		}
	}
	var want []string
	for _, f := range fields {
		want = append(want, f.key)
	}
	want = append(want, "env")
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("struct keys:\n  %v\nfield table (+ env):\n  %v", keys, want)
	}
}

// procMasksDoc is the table of /proc masks, from rootfs's table.
func procMasksDoc() string {
	how := map[rootfs.Kind]string{
		rootfs.KindMaskFile: "reads as empty (/dev/null over it)",
		rootfs.KindMaskDir:  "empty (a read-only tmpfs over it)",
		rootfs.KindRebindRO: "read-only",
	}
	var b bytes.Buffer
	b.WriteString("\n| path | inside | why |\n|---|---|---|\n")
	for _, m := range rootfs.ProcMaskTable() {
		fmt.Fprintf(&b, "| `/proc/%s` | %s | %s |\n", m.Path, how[m.Kind], cell(m.Why))
	}
	b.WriteString("\n")
	return b.String()
}
