package httpapi

import (
	"encoding/json"
	"errors"
	"io"
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

// decodeJSON reads one JSON value from the body, at most MaxRequestBytes,
// into v. Unknown fields are allowed; wrong types, syntax errors and
// anything but white space after the value are not.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	// The innermost writer, so the server learns the body was cut short and
	// closes the connection instead of reading on.
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err)
		}
		return errorf(airlock.EINVALID, "invalid-json", "unexpected data after the JSON object at byte %d", dec.InputOffset())
	}
	return nil
}

// jsonError turns a decoding error into a client-safe problem.
func jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return errorf(airlock.ETOOLARGE, "request-too-large", "request body is larger than %d bytes", mbe.Limit)
	case errors.As(err, &se):
		return errorf(airlock.EINVALID, "invalid-json", "malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field == "" || te.Type == nil {
			return errorf(airlock.EINVALID, "invalid-json", "request body must be a JSON object, not %s", te.Value)
		}
		return errorf(airlock.EINVALID, "invalid-json", "field %q must be %s, not %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.EOF):
		return errorf(airlock.EINVALID, "invalid-json", "request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(airlock.EINVALID, "invalid-json", "request body ends in the middle of the JSON object")
	}
	return errorf(airlock.EINVALID, "invalid-json", "request body could not be read as JSON")
}

// jsonTypeName names a Go kind the way a JSON user would.
func jsonTypeName(kind string) string {
	switch {
	case kind == "bool":
		return "a boolean"
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "slice", kind == "array":
		return "an array"
	}
	return "an object"
}
