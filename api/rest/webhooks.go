package rest

import (
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// Webhooks (airlock.WebhookService): a tenant's URLs that receive its
// events, signed, retried, with a delivery log and replay.

// webhooks returns the webhook service, or answers 501 when there is none.
func (s *Server) webhooks(w http.ResponseWriter, r *http.Request) (airlock.WebhookService, bool) {
	if s.cfg.Webhooks == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "webhooks-disabled", "webhooks are not enabled on this server (they need a master key)"))
		return nil, false
	}
	return s.cfg.Webhooks, true
}

// createWebhook registers a webhook: POST /v1/webhooks {"url", "events"}.
// 201 with the webhook and its signing secret, shown this once.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.webhooks(w, r)
	if !ok {
		return
	}
	var req airlock.CreateWebhookRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	hook, err := svc.CreateWebhook(r.Context(), TenantFrom(r.Context()), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/webhooks/"+url.PathEscape(hook.ID))
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, hook)
}

// listWebhooks lists the tenant's webhooks, without secrets:
// GET /v1/webhooks.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.webhooks(w, r)
	if !ok {
		return
	}
	page, err := svc.ListWebhooks(r.Context(), TenantFrom(r.Context()))
	if err != nil {
		s.error(w, r, err)
		return
	}
	if page.Webhooks == nil {
		page.Webhooks = []*airlock.Webhook{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// deleteWebhook removes one of the tenant's webhooks and its pending
// deliveries: DELETE /v1/webhooks/{id}. 204.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.webhooks(w, r)
	if !ok {
		return
	}
	if err := svc.DeleteWebhook(r.Context(), TenantFrom(r.Context()), r.PathValue("id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listDeliveries pages through a webhook's delivery log, newest first:
// GET /v1/webhooks/{id}/deliveries?limit=&before=.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.webhooks(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), q.Has("limit"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	before := q.Get("before")
	if len(before) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
		return
	}
	page, err := svc.ListDeliveries(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), before, limit)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if page.Deliveries == nil {
		page.Deliveries = []*airlock.WebhookDelivery{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// replayDelivery sends a delivery again, now, whatever its state:
// POST /v1/webhooks/{id}/deliveries/{delivery_id}/replay. 202 with the
// delivery, pending.
func (s *Server) replayDelivery(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.webhooks(w, r)
	if !ok {
		return
	}
	d, err := svc.ReplayDelivery(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("delivery_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, d)
}
