package nsjail

import (
	"encoding/json"
	"sync"
)

// resultJSONWarm runs the Result's warm-up once per process: the caches
// it fills are encoding/json's, process-wide.
var resultJSONWarm sync.Once

// warmResultJSON fills encoding/json's per-type caches for the Result
// while the payload runs, off the path after its exit. A type's first
// encode reflects over it and every type it reaches (cachedTypeFields
// builds each field's encoder, recursively, and allocates what it finds):
// for the Result that was ~0.4 ms of "sbx: result ready" to the printed
// --json, after the payload was gone (docs/DESIGN.md, "The Result's
// JSON"). The init does the same for its status line (warmWire). Only the
// caches change: the bytes printed are the same.
func (s *supervisor) warmResultJSON() {
	resultJSONWarm.Do(func() {
		json.Marshal(&Result{})
		s.tl.mark("sbx: Result's JSON types warmed")
	})
}
