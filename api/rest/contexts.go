package rest

import (
	"context"
	"net/http"
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
// Accept: text/event-stream, a start event, stdout and stderr events as
// the cell prints and a final result event (or error with a problem). A
// stream the client does not keep up with is dropped (see sse.go); the
// cell runs on to its end.
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
	// A cell may run longer than the server's write timeout; a stream sets
	// a deadline on each of its writes instead.
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
	// The stream begins (with a start event) once the cell is handed to
	// its context, so a problem found before that is still a plain
	// problem response.
	st := s.newEventStream(w)
	defer st.drop(errStreamEnded)
	v, cut, err := s.streamed(r, st, func(ctx context.Context) (any, error) {
		return svc.RunCell(ctx, tenant, id, cid, req, cellObserver{st})
	})
	if cut {
		panic(http.ErrAbortHandler)
	}
	if !st.started() && err != nil {
		s.error(w, r, err)
		return
	}
	start := map[string]string{"context_id": cid}
	if err != nil {
		p := streamProblem(err)
		s.log.Warn("cell failed mid-stream", "request_id", info(r.Context()).id, "error", err.Error())
		st.end("start", start, "error", p)
	} else {
		st.end("start", start, "result", v)
	}
	if st.droppedErr() != nil {
		s.streamDropped(r, st, false)
		panic(http.ErrAbortHandler)
	}
}

// cellObserver feeds a cell's events to its stream; output before the
// start event waits behind it.
type cellObserver struct{ st *eventStream }

func (o cellObserver) Started(contextID string) {
	o.st.begin("start", map[string]string{"context_id": contextID})
}
func (o cellObserver) Stdout(b []byte) { o.st.output("stdout", b) }
func (o cellObserver) Stderr(b []byte) { o.st.output("stderr", b) }
