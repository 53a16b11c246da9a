package serve

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the API, served as is at
// /v1/openapi.json. It is written by hand, next to the handlers; a unit
// test checks that it parses and names every route the server registers,
// and an integration test validates the real responses of a real server
// against it (tests/ops_test.go).
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI is the embedded document.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}
