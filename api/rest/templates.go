package rest

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
)

// Templates (airlock.TemplateService): a tenant's own under /v1/templates,
// the operator's under /v1/admin/templates.

// templates returns the template service, or answers 501.
func (s *Server) templates(w http.ResponseWriter, r *http.Request) (airlock.TemplateService, bool) {
	if s.cfg.Templates == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "templates-disabled", "templates are not enabled on this server"))
		return nil, false
	}
	return s.cfg.Templates, true
}

// templateList is the body of GET /v1/templates.
type templateList struct {
	Templates []airlock.Template `json:"templates"`
}

// createTemplate starts a build: POST /v1/templates. 202 with the
// template, status building.
func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) {
	s.createTemplateAs(w, r, TenantFrom(r.Context()))
}

// adminCreateTemplate makes an operator template, visible to every
// tenant: POST /v1/admin/templates.
func (s *Server) adminCreateTemplate(w http.ResponseWriter, r *http.Request) {
	s.createTemplateAs(w, r, nil)
}

func (s *Server) createTemplateAs(w http.ResponseWriter, r *http.Request, tenant *airlock.Tenant) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	var req airlock.CreateTemplateRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	t, err := svc.CreateTemplate(r.Context(), tenant, req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/templates/"+url.PathEscape(t.Name))
	s.writeJSON(w, r, http.StatusAccepted, t)
}

// listTemplates lists the tenant's templates and the operator's:
// GET /v1/templates.
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	s.listTemplatesAs(w, r, TenantFrom(r.Context()))
}

// adminListTemplates lists the operator's templates: GET /v1/admin/templates.
func (s *Server) adminListTemplates(w http.ResponseWriter, r *http.Request) {
	s.listTemplatesAs(w, r, nil)
}

func (s *Server) listTemplatesAs(w http.ResponseWriter, r *http.Request, tenant *airlock.Tenant) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	l, err := svc.ListTemplates(r.Context(), tenant)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if l == nil {
		l = []airlock.Template{}
	}
	s.writeJSON(w, r, http.StatusOK, templateList{Templates: l})
}

// getTemplate shows a template: GET /v1/templates/{name}.
func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	t, err := svc.GetTemplate(r.Context(), TenantFrom(r.Context()), r.PathValue("name"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}

// deleteTemplate removes the tenant's template: DELETE /v1/templates/{name}.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	s.deleteTemplateAs(w, r, TenantFrom(r.Context()))
}

// adminDeleteTemplate removes an operator template:
// DELETE /v1/admin/templates/{name}.
func (s *Server) adminDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	s.deleteTemplateAs(w, r, nil)
}

func (s *Server) deleteTemplateAs(w http.ResponseWriter, r *http.Request, tenant *airlock.Tenant) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	if err := svc.DeleteTemplate(r.Context(), tenant, r.PathValue("name")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// templateLogs streams a template's build log: GET
// /v1/templates/{name}/logs. With Accept: text/event-stream, server-sent
// events: template {template_id, name, status}, then log {data} as lines
// are written, then end {template_id, status, reason, failed_line} once
// the build is over. Otherwise the log as text/plain, sent as it grows
// until the build is over.
func (s *Server) templateLogs(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	tenant, name := TenantFrom(r.Context()), r.PathValue("name")
	t, err := svc.GetTemplate(r.Context(), tenant, name)
	if err != nil {
		s.error(w, r, err)
		return
	}
	log, err := svc.TemplateLog(r.Context(), tenant, name)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer log.Close()
	// A build may take many minutes; each write has its own deadline.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	if !wantsEventStream(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		buf := make([]byte, 32<<10)
		for {
			n, err := log.Read(buf)
			if n > 0 {
				rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}
	st := s.newEventStream(w)
	defer st.drop(errStreamEnded)
	start := map[string]any{"template_id": t.ID, "name": t.Name, "status": t.Status}
	st.begin("template", start)
	buf := make([]byte, 16<<10)
	for {
		n, err := log.Read(buf)
		if n > 0 {
			st.output("log", buf[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(http.ErrAbortHandler) // the client went away
		}
		if st.droppedErr() != nil {
			panic(http.ErrAbortHandler)
		}
	}
	end := map[string]any{"template_id": t.ID}
	if t, err := svc.GetTemplate(r.Context(), tenant, name); err == nil {
		end["status"], end["reason"], end["failed_line"] = t.Status, t.Reason, t.FailedLine
	}
	st.end("template", start, "end", end)
}

// uploadTemplateContext stores a tar for a later POST /v1/templates:
// POST /v1/templates/contexts. 201 with {context_id, size_bytes, sha256}.
func (s *Server) uploadTemplateContext(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.templates(w, r)
	if !ok {
		return
	}
	upload.Body(w, r, s.uploadRate)
	tc, err := svc.UploadContext(r.Context(), TenantFrom(r.Context()), r.Body)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, tc)
}
