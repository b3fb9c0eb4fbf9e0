package rest

import (
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
)

// filePath returns the path query parameter of a files request.
func (s *Server) filePath(w http.ResponseWriter, r *http.Request, required bool) (string, bool) {
	q := r.URL.Query()
	if len(q["path"]) > 1 {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-path", "path must be given once"))
		return "", false
	}
	p := q.Get("path")
	if p == "" && required {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-path", "the path query parameter is required (relative to /workspace, or absolute under /workspace or /tmp)"))
		return "", false
	}
	return p, true
}

// putFile uploads a file into a session, streaming the body:
// PUT /v1/sessions/{id}/files?path=. The file is replaced as a whole once
// the upload is complete; a failed upload leaves nothing.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	p, ok := s.filePath(w, r, true)
	if !ok {
		return
	}
	// An upload may take longer than the server's read timeout, but it
	// must keep up a minimum rate (upload.Body sets the read deadline).
	upload.Body(w, r, s.uploadRate)
	res, err := svc.PutFile(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), p, r.ContentLength, r.Body)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// getFile downloads a file of a session, streaming it:
// GET /v1/sessions/{id}/files?path=; with list=1 it lists a directory.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	list := false
	switch q.Get("list") {
	case "", "0", "false":
	case "1", "true":
		list = true
	default:
		s.error(w, r, errorf(airlock.EINVALID, "invalid-list", "list must be 1 or 0"))
		return
	}
	p, ok := s.filePath(w, r, !list)
	if !ok {
		return
	}
	tenant, id := TenantFrom(r.Context()), r.PathValue("id")
	if list {
		l, err := svc.ListFiles(r.Context(), tenant, id, p)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, l)
		return
	}
	started := false
	_, err := svc.GetFile(r.Context(), tenant, id, p, func(size int64) io.Writer {
		started = true
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if cd := mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}); cd != "" {
			h.Set("Content-Disposition", cd)
		}
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Time{})
		w.WriteHeader(http.StatusOK)
		return &deadlineWriter{w: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}
	})
	if err != nil {
		if started {
			// Too late for a problem: cut the response, so the client sees
			// a short body instead of a file that looks whole.
			s.log.Warn("file download failed mid-stream", "request_id", info(r.Context()).id, "error", err.Error())
			panic(http.ErrAbortHandler)
		}
		s.error(w, r, err)
	}
}

// deleteFile removes a file or an empty directory of a session:
// DELETE /v1/sessions/{id}/files?path=. 204 when it is gone.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	p, ok := s.filePath(w, r, true)
	if !ok {
		return
	}
	if err := svc.DeleteFile(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), p); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deadlineWriter bounds each write of a download: the bytes come from the
// agent's connection, which every call of the session shares, so a client
// that stops reading must fail its own download after a while instead of
// stalling the session (the download then ends cut short).
type deadlineWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(b)
}
