package httpapi

import "net/http"

// authMode says how a route authenticates.
type authMode int

const (
	authNone     authMode = iota // public
	authBearer                   // a valid bearer key is required
	authOptional                 // a bearer key, if sent, must be valid; the handler decides
)

// route is one operation of the API.
type route struct {
	method  string
	pattern string // a net/http pattern path; also the OpenAPI path
	handle  func(*Server, http.ResponseWriter, *http.Request)
	auth    authMode
}

// routes is the one list of operations: New registers exactly these, and a
// test checks openapi.json documents exactly these.
var routes = []route{
	{http.MethodGet, "/healthz", (*Server).healthz, authNone},
	{http.MethodGet, "/readyz", (*Server).readyz, authNone},
	{http.MethodGet, "/openapi.json", (*Server).openapi, authNone},
	{http.MethodGet, "/metrics", (*Server).metrics, authNone},
	{http.MethodPost, "/v1/execute", (*Server).execute, authBearer},
	{http.MethodGet, "/v1/executions", (*Server).listExecutions, authBearer},
	{http.MethodGet, "/v1/executions/{id}", (*Server).getExecution, authBearer},
	// Signed URL (token query) or the owner's bearer key.
	{http.MethodGet, "/v1/artifacts/{id}", (*Server).getArtifact, authOptional},
}
