package httpapi

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
	var req airlock.ExecuteRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if err := req.Validate(s.cfg.MaxTimeout); err != nil {
		s.error(w, r, err)
		return
	}
	e, err := s.cfg.Executor.Execute(r.Context(), tenant, agentID, req)
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
