// Package rest is Airlock's HTTP/JSON control API: the routes under /v1,
// health and readiness, and the OpenAPI 3.1 document that describes them.
//
// It owns:
//   - the HTTP surface: routing (one route table, also checked against
//     openapi.json by a test), request decoding and limits, JSON responses;
//   - strict request bodies (decode.go): an unknown member, a member given
//     twice or a name in another case is a 400 problem (unknown-field,
//     duplicate-field) naming it, at any depth. Request bodies are decoded
//     with github.com/go-json-experiment/json (encoding/json/v2), and only
//     they: responses and everything else use encoding/json;
//   - errors as RFC 9457 problem documents (application/problem+json) with
//     type URIs /problems/<slug> (relative references that resolve to the
//     catalogue served at GET /problems/{slug}; every slug is in
//     internal/problem's catalogue and docs/errors.md), and the one table from
//     airlock error code to HTTP status (StatusFor) that the client maps
//     back with (ErrorFromProblem, DecodeProblem). Internal errors are
//     logged in full and sent as "internal error", never echoed;
//   - authentication: bearer API keys hashed with airlock.HashAPIKey and
//     resolved to a tenant through airlock.Store; the tenant rides in the
//     request context (TenantFrom). Another tenant's records are 404, never
//     403;
//   - GET /metrics behind its own key (Config.MetricsKey), or open only on
//     a server that listens on loopback alone (Config.LoopbackOnly);
//   - signed artifact URLs (HMAC-SHA256, SignArtifactURL), built on
//     Config.PublicURL when set, else on the request's host, and artifact
//     downloads from airlock.Blobs under ArtifactBlobKey.
//
// It must not touch sandboxes, backends or images (it calls an
// airlock.Executor and an airlock.SessionService and nothing below them),
// nor SQL or files (it speaks only to airlock.Store and airlock.Blobs).
// Streams (exec and cell output) are server-sent events (sse.go): the
// observer callbacks only queue events (bounded per stream) and a writer
// goroutine per stream sends them with a deadline on each write, so a slow
// or stalled client loses its stream and never holds up the agent's
// connection. The exit code of user code is a result (200), never an API
// error.
package rest
