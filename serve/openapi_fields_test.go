package serve

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/nsjail/spec"
)

// TestOpenAPIHasEveryResultField: every JSON field of the Result, and of
// the types it holds, is a property of its schema in the served document.
// The integration test validates real answers, but only the fields a run
// happens to fill; a field added to the contract (pids_peak_source,
// evidence, image, pooled) must reach the document in the same change.
// The same holds for the session contract's types.
func TestOpenAPIHasEveryResultField(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, typ := range map[string]reflect.Type{
		"Result":         reflect.TypeFor[spec.Result](),
		"Usage":          reflect.TypeFor[spec.Usage](),
		"LimitInfo":      reflect.TypeFor[spec.LimitInfo](),
		"Layer":          reflect.TypeFor[spec.Layer](),
		"FileEntry":      reflect.TypeFor[spec.FileEntry](),
		"InputEntry":     reflect.TypeFor[spec.InputEntry](),
		"Attempt":        reflect.TypeFor[spec.Attempt](),
		"NetworkSummary": reflect.TypeFor[spec.Summary](),
		"Denial":         reflect.TypeFor[spec.Denial](),
		// The session contract (issue 15).
		"Execution":          reflect.TypeFor[spec.Execution](),
		"LogChunk":           reflect.TypeFor[spec.LogChunk](),
		"MIMEBundle":         reflect.TypeFor[spec.MIMEBundle](),
		"PyError":            reflect.TypeFor[spec.PyError](),
		"PyFrame":            reflect.TypeFor[spec.PyFrame](),
		"ExecUsage":          reflect.TypeFor[spec.ExecUsage](),
		"CellEgress":         reflect.TypeFor[spec.CellEgress](),
		"Session":            reflect.TypeFor[SessionResponse](),
		"SessionRequest":     reflect.TypeFor[SessionRequest](),
		"SessionExecRequest": reflect.TypeFor[SessionExecRequest](),
		"SessionEvent":       reflect.TypeFor[SessionEvent](),
		"SessionFile":        reflect.TypeFor[nsjail.SessionFile](),
	} {
		props := doc.Components.Schemas[schema].Properties
		if props == nil {
			t.Errorf("the document has no schema %s", schema)
			continue
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			if _, ok := props[name]; !ok {
				t.Errorf("schema %s lacks %s (%s.%s)", schema, name, typ.Name(), f.Name)
			}
		}
	}
}
