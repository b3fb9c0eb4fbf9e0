package rest

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

// MaxRequestBytes caps a request body: code may be airlock.MaxCodeBytes and
// JSON escaping can double it.
const MaxRequestBytes = 2 << 20

// MaxAgentIDBytes caps the X-Agent-Id header.
const MaxAgentIDBytes = 200

// execute runs one-shot code: POST /v1/execute. What the user's program
// does (exit code, timeout, OOM kill) is a result, sent with 200; only a
// request the service cannot serve is a problem.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	var req airlock.ExecuteRequest
	s.runExecute(w, r, &req, func() airlock.ExecuteRequest { return req })
}

// SandboxExecuteRequest is the body of POST /v1/sandbox/execute: the
// request of the reference blueprint's /execute, exactly. It has no image
// and no isolation: the language's default image runs it, under the
// node's default isolation.
type SandboxExecuteRequest struct {
	Language     airlock.Language `json:"language"`
	Code         string           `json:"code"`
	TimeoutSec   int              `json:"timeout_sec,omitempty"`
	AllowNetwork bool             `json:"allow_network,omitempty"`
	// Template (our addition) runs it from a template.
	Template string `json:"template,omitempty"`
}

// sandboxExecute is the reference route: POST /v1/sandbox/execute takes
// the blueprint's request and answers like /v1/execute, whose response
// carries every field of the blueprint's (exit_code, stdout, stderr,
// duration_ms, peak_memory_mb, artifacts with filename, size_bytes and
// url) and more.
func (s *Server) sandboxExecute(w http.ResponseWriter, r *http.Request) {
	var req SandboxExecuteRequest
	s.runExecute(w, r, &req, func() airlock.ExecuteRequest {
		return airlock.ExecuteRequest{Language: req.Language, Code: req.Code, TimeoutSec: req.TimeoutSec, AllowNetwork: req.AllowNetwork, Template: req.Template}
	})
}

// runExecute decodes the body into body, turns it into the request with
// toRequest, runs it (the executor validates it) and answers with the
// execution.
func (s *Server) runExecute(w http.ResponseWriter, r *http.Request, body any, toRequest func() airlock.ExecuteRequest) {
	tenant := TenantFrom(r.Context())
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		s.unsupportedMediaType(w, r)
		return
	}
	agentID, err := agentID(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if err := decodeJSON(w, r, body); err != nil {
		s.error(w, r, err)
		return
	}
	e, err := s.cfg.Executor.Execute(r.Context(), tenant, agentID, toRequest())
	if err != nil {
		s.error(w, r, err)
		return
	}
	if e == nil {
		s.error(w, r, errors.New("executor returned no execution and no error"))
		return
	}
	s.writeJSON(w, r, http.StatusOK, s.withArtifactURLs(r, tenant, e))
}

// isJSONContentType accepts a missing Content-Type, application/json and
// any application/*+json.
func isJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
}

func (s *Server) unsupportedMediaType(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Accept-Post", "application/json")
	s.writeProblem(w, r, newProblem(airlock.EINVALID, "unsupported-media-type",
		http.StatusUnsupportedMediaType, "Content-Type must be application/json"))
}

// agentID returns the optional X-Agent-Id header: at most MaxAgentIDBytes
// of printable ASCII (space included).
func agentID(r *http.Request) (string, error) {
	vs := r.Header.Values("X-Agent-Id")
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", errorf(airlock.EINVALID, "invalid-agent-id", "X-Agent-Id must be sent once")
	}
	v := vs[0]
	if len(v) > MaxAgentIDBytes {
		return "", errorf(airlock.EINVALID, "invalid-agent-id", "X-Agent-Id is %d bytes; the limit is %d", len(v), MaxAgentIDBytes)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", errorf(airlock.EINVALID, "invalid-agent-id", "X-Agent-Id must be printable ASCII")
		}
	}
	return v, nil
}
