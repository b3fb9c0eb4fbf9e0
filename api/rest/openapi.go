package rest

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes every route of the API (OpenAPI 3.1). A test
// keeps it in step with the route table and the domain types.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// openapi serves the document: GET /openapi.json.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(openAPIDocument)
}
