package rest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// previewService returns the preview service, or answers 501.
func (s *Server) previewService(w http.ResponseWriter, r *http.Request) (airlock.PreviewService, int, bool) {
	if s.cfg.Preview == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "preview-disabled", "preview URLs are not enabled on this server"))
		return nil, 0, false
	}
	port, ok := previewPort(r.PathValue("port"))
	if !ok {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-port", "port %q is not a port: a number from 1 to 65535", cutString(r.PathValue("port"), 16)))
		return nil, 0, false
	}
	return s.cfg.Preview, port, true
}

// previewPort reads a port from the path: 1-65535, digits only, no
// leading zero.
func previewPort(v string) (int, bool) {
	if v == "" || len(v) > 5 || v[0] == '0' {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 1 && n <= 65535
}

func cutString(v string, n int) string {
	if len(v) > n {
		return v[:n] + "..."
	}
	return v
}

// servePreview proxies any method of /v1/sessions/{id}/ports/{port}/{path...}
// to the port in the session: the tenant's key, a preview token or a
// public port admits it (the preview service decides).
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request) {
	svc, port, ok := s.previewService(w, r)
	if !ok {
		return
	}
	// The rest of the path as the client sent it (escaped), so the app
	// in the sandbox sees the same bytes.
	prefix := "/v1/sessions/" + r.PathValue("id") + "/ports/" + r.PathValue("port")
	path := "/" + r.PathValue("path")
	if ep := r.URL.EscapedPath(); len(ep) > len(prefix) && ep[:len(prefix)] == prefix {
		path = ep[len(prefix):]
	}
	svc.ServePreview(w, r, TenantFrom(r.Context()), r.PathValue("id"), port, path)
}

// previewTokenRequest is the body of POST .../ports/{port}/token.
type previewTokenRequest struct {
	TTLS int `json:"ttl_s"`
}

// createPreviewToken issues a signed token for one port:
// POST /v1/sessions/{id}/ports/{port}/token {"ttl_s"}.
func (s *Server) createPreviewToken(w http.ResponseWriter, r *http.Request) {
	svc, port, ok := s.previewService(w, r)
	if !ok {
		return
	}
	var req previewTokenRequest
	if r.ContentLength != 0 {
		if !s.decodeBody(w, r, &req) {
			return
		}
	}
	if req.TTLS < 0 {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-ttl", "ttl_s must be a positive number of seconds"))
		return
	}
	tok, err := svc.CreatePreviewToken(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), port, time.Duration(req.TTLS)*time.Second)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, tok)
}

// revokePreviewTokens revokes the port's tokens:
// DELETE /v1/sessions/{id}/ports/{port}/token, all of them, or the one
// named by ?token_id=.
func (s *Server) revokePreviewTokens(w http.ResponseWriter, r *http.Request) {
	svc, port, ok := s.previewService(w, r)
	if !ok {
		return
	}
	p, err := svc.RevokePreviewTokens(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), port, r.URL.Query().Get("token_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, p)
}

// previewPortRequest is the body of PUT .../ports/{port}.
type previewPortRequest struct {
	Public *bool `json:"public"`
}

// setPreviewPort makes a port public or private:
// PUT /v1/sessions/{id}/ports/{port} {"public": true}.
func (s *Server) setPreviewPort(w http.ResponseWriter, r *http.Request) {
	svc, port, ok := s.previewService(w, r)
	if !ok {
		return
	}
	var req previewPortRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Public == nil {
		s.error(w, r, errorf(airlock.EINVALID, "missing-field", "public is required: true or false"))
		return
	}
	p, err := svc.SetPreviewPort(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), port, *req.Public)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, p)
}

// getPreviewPort describes a port (public or not, its live tokens):
// GET /v1/sessions/{id}/ports/{port}.
func (s *Server) getPreviewPort(w http.ResponseWriter, r *http.Request) {
	svc, port, ok := s.previewService(w, r)
	if !ok {
		return
	}
	p, err := svc.PreviewPort(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), port)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, p)
}
