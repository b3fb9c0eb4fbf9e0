package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// createContext starts a persistent interpreter in a session:
// POST /v1/sessions/{id}/contexts {"language": "python"|"node"}.
func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	var req airlock.CreateContextRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Language == "" {
		s.error(w, r, errorf(airlock.EINVALID, "missing-language", "language is required (python or node)"))
		return
	}
	c, err := svc.CreateContext(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, c)
}

// ContextList is the answer of GET /v1/sessions/{id}/contexts.
type ContextList struct {
	Contexts []*airlock.CodeContext `json:"contexts"`
}

// listContexts lists a session's contexts: GET /v1/sessions/{id}/contexts.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	cs, err := svc.ListContexts(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ContextList{Contexts: cs})
}

// deleteContext ends a context: DELETE /v1/sessions/{id}/contexts/{cid}.
func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	if err := svc.DeleteContext(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("cid")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// restartContext starts a context afresh:
// POST /v1/sessions/{id}/contexts/{cid}/restart.
func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	c, err := svc.RestartContext(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("cid"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, c)
}

// runCell runs a cell in a context: POST .../contexts/{cid}/run
// {"code", "timeout_sec"}. The answer is the cell's result, or with
// Accept: text/event-stream, stdout and stderr events as the cell prints
// and a final result event (or error with a problem).
func (s *Server) runCell(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	var req airlock.RunCellRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	tenant, id, cid := TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("cid")
	// A cell may run longer than the server's write timeout.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if !wantsEventStream(r) {
		res, err := svc.RunCell(r.Context(), tenant, id, cid, req, nil)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, res)
		return
	}
	obs := &cellStream{w: w}
	res, err := svc.RunCell(r.Context(), tenant, id, cid, req, obs)
	sse := obs.stream()
	if sse == nil {
		if err != nil {
			s.error(w, r, err)
			return
		}
		sse = obs.start()
	}
	sse.finish()
	if err != nil {
		p, _ := problemFor(err)
		s.log.Warn("cell failed mid-stream", "request_id", info(r.Context()).id, "error", err.Error())
		sse.event("error", p)
	} else {
		sse.event("result", res)
	}
	sse.close()
}

// cellStream starts the event stream (with a start event) once the cell
// is handed to its context, so a problem found before that is still a
// plain problem response.
type cellStream struct {
	w   http.ResponseWriter
	mu  sync.Mutex
	sse *sseWriter
}

func (c *cellStream) start() *sseWriter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sse == nil {
		c.sse = startEventStream(c.w)
	}
	return c.sse
}

func (c *cellStream) stream() *sseWriter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sse
}

func (c *cellStream) Started(contextID string) {
	c.start().event("start", map[string]string{"context_id": contextID})
}

func (c *cellStream) Stdout(b []byte) { c.start().output("stdout", b) }
func (c *cellStream) Stderr(b []byte) { c.start().output("stderr", b) }
