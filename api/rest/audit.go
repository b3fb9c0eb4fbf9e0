package rest

import (
	"context"
	"github.com/airlockhq/airlock/internal/problem"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// The audit log: every control-plane action (keys, tenants, grants,
// quotas, quarantine) made through this API, with who asked (the key's ID
// and name), what, when and how it ended, refusals included.

// audit records one action of the request's principal. A failure to
// record is logged: the action itself has happened.
func (s *Server) audit(r *http.Request, action, target string, status int, result, detail string) {
	if s.cfg.Audit == nil {
		return
	}
	p := PrincipalFrom(r)
	if p == nil {
		return
	}
	e := &airlock.AuditEntry{
		KeyID: p.Key.ID, KeyName: p.Key.Name, Role: p.Key.Role, TenantID: p.Key.TenantID,
		Action: action, Target: clipText(target, 200), Status: status, Result: result, Detail: clipText(detail, 500),
	}
	// Record it even if the client went away mid-request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.cfg.Audit.RecordAudit(ctx, e); err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelError, "audit log write failed",
			slog.String("request_id", info(r.Context()).id), slog.String("action", action),
			slog.String("key", p.Key.ID), slog.String("error", err.Error()))
	}
}

// auditOK records a successful action.
func (s *Server) auditOK(r *http.Request, action, target string, status int, detail string) {
	s.audit(r, action, target, status, "ok", detail)
}

// audited answers err as a problem and records the refusal.
func (s *Server) audited(w http.ResponseWriter, r *http.Request, action, target, detail string, err error) {
	p, _ := problemFor(err)
	s.audit(r, action, target, p.Status, problem.Slug(p.Type), detail)
	s.error(w, r, err)
}

// quoteDetail quotes a client's text for an audit detail.
func quoteDetail(s string) string { return strconv.Quote(clipText(s, 100)) }

// listAudit answers GET /v1/admin/audit?limit=&before=&action=: the
// audit log, newest first; a full page carries next_cursor.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Audit == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "audit-disabled", "this server keeps no audit log"))
		return
	}
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), q.Has("limit"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	before, action := q.Get("before"), q.Get("action")
	if len(before) > maxCursorBytes || len(action) > 100 {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
		return
	}
	es, err := s.cfg.Audit.ListAudit(r.Context(), airlock.AuditFilter{Before: before, Action: action, Limit: limit})
	if err != nil {
		s.error(w, r, err)
		return
	}
	page := struct {
		Entries    []*airlock.AuditEntry `json:"entries"`
		NextCursor string                `json:"next_cursor,omitempty"`
	}{Entries: es}
	if page.Entries == nil {
		page.Entries = []*airlock.AuditEntry{}
	}
	if len(es) == limit {
		page.NextCursor = es[len(es)-1].ID
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// pageLimit parses a limit query parameter.
func pageLimit(v string, has bool) (int, error) {
	if v == "" && !has {
		return DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageLimit {
		return 0, errorf(airlock.EINVALID, "invalid-limit", "limit must be a whole number from 1 to %d", MaxPageLimit)
	}
	return n, nil
}
