package rest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/service/webhook"
)

// lazyHooks lets the test give the server a webhook service built on
// the env's store after the env is made.
type lazyHooks struct{ airlock.WebhookService }

type lazyFeed struct{ airlock.EventStore }

func newHooksEnv(t *testing.T) (*env, *webhook.Service) {
	t.Helper()
	hooks, feed := &lazyHooks{}, &lazyFeed{}
	e := newEnv(t, func(c *rest.Config) { c.Webhooks, c.Feed = hooks, feed })
	mk, _ := seal.GenerateMasterKey()
	keys, err := seal.NewKeys(e.store, mk)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := webhook.New(webhook.Config{Store: e.store, Keys: keys, MaxPerTenant: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hooks.WebhookService, feed.EventStore = svc, e.store
	return e, svc
}

var jsonHeader = map[string]string{"Content-Type": "application/json"}

// The webhook routes: create answers the secret once; list never shows
// it; another tenant's key and a revoked key are refused on every route;
// bad bodies are problems.
func TestWebhookRoutes(t *testing.T) {
	e, _ := newHooksEnv(t)
	ctx := context.Background()
	var made airlock.Webhook
	body := decodeJSON(t, e.do(req{method: "POST", path: "/v1/webhooks", key: e.keyA, header: jsonHeader,
		body: `{"url": "https://example.com/hook", "events": ["session.created", "session.ended"]}`}), http.StatusCreated, &made)
	if !strings.HasPrefix(made.Secret, "whsec_") || made.ID == "" || len(made.Events) != 2 {
		t.Fatalf("created %s", body)
	}
	var list airlock.WebhookPage
	body = decodeJSON(t, e.do(req{method: "GET", path: "/v1/webhooks", key: e.keyA}), http.StatusOK, &list)
	if len(list.Webhooks) != 1 || strings.Contains(string(body), made.Secret) || strings.Contains(string(body), "secret") {
		t.Fatalf("list shows %s", body)
	}
	// An event of A's queues a delivery to A's webhook.
	if err := e.store.RecordEvent(ctx, &airlock.Event{Type: airlock.EventSessionCreated, TenantID: e.tenantA.ID, SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	var deliveries airlock.WebhookDeliveryPage
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/webhooks/" + made.ID + "/deliveries", key: e.keyA}), http.StatusOK, &deliveries)
	if len(deliveries.Deliveries) != 1 || deliveries.Deliveries[0].EventType != airlock.EventSessionCreated {
		t.Fatalf("deliveries %+v", deliveries)
	}
	did := deliveries.Deliveries[0].ID
	var replayed airlock.WebhookDelivery
	decodeJSON(t, e.do(req{method: "POST", path: "/v1/webhooks/" + made.ID + "/deliveries/" + did + "/replay", key: e.keyA}), http.StatusAccepted, &replayed)
	if replayed.ID != did || replayed.State != airlock.DeliveryPending {
		t.Errorf("replayed %+v", replayed)
	}

	// B's key: A's webhook is not found on every route; B's list is empty.
	for _, r := range []req{
		{method: "DELETE", path: "/v1/webhooks/" + made.ID},
		{method: "GET", path: "/v1/webhooks/" + made.ID + "/deliveries"},
		{method: "POST", path: "/v1/webhooks/" + made.ID + "/deliveries/" + did + "/replay"},
	} {
		r.key = e.keyB
		if resp := e.do(r); resp.StatusCode != http.StatusNotFound {
			t.Errorf("B: %s %s: %d, want 404", r.method, r.path, resp.StatusCode)
		}
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/webhooks", key: e.keyB}), http.StatusOK, &list)
	if len(list.Webhooks) != 0 {
		t.Errorf("B lists %+v", list.Webhooks)
	}
	// B's feed has none of A's events.
	var feed airlock.EventPage
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/events?cursor=", key: e.keyB}), http.StatusOK, &feed)
	if len(feed.Events) != 0 {
		t.Errorf("B's feed: %+v", feed.Events)
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/events?cursor=", key: e.keyA}), http.StatusOK, &feed)
	if len(feed.Events) != 1 || feed.NextCursor != feed.Events[0].ID {
		t.Errorf("A's feed: %+v", feed)
	}

	// A revoked key and no key: 401 on every route.
	revoked, _ := addTenantKey(t, e, e.tenantA)
	if _, err := e.store.RevokeAPIKey(ctx, e.keyID(revoked)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{revoked, ""} {
		for _, r := range []req{
			{method: "POST", path: "/v1/webhooks", header: jsonHeader, body: `{"url": "https://example.com/x"}`},
			{method: "GET", path: "/v1/webhooks"},
			{method: "DELETE", path: "/v1/webhooks/" + made.ID},
			{method: "GET", path: "/v1/webhooks/" + made.ID + "/deliveries"},
			{method: "POST", path: "/v1/webhooks/" + made.ID + "/deliveries/" + did + "/replay"},
			{method: "GET", path: "/v1/events?cursor="},
		} {
			r.key = key
			if resp := e.do(r); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("key %q: %s %s: %d, want 401", key, r.method, r.path, resp.StatusCode)
			}
		}
	}

	// Bad input is a problem, nothing is made.
	for _, b := range []string{`{"url": "file:///etc/passwd"}`, `{"url": "https://x", "events": ["nope"]}`, `{"url": 3}`, `{"url": "https://x", "extra": 1}`, `not json`} {
		resp := e.do(req{method: "POST", path: "/v1/webhooks", key: e.keyA, header: jsonHeader, body: b})
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %s", b, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp := e.do(req{method: "GET", path: "/v1/events?cursor=nope", key: e.keyA}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown cursor: %d", resp.StatusCode)
	}
	// The per-tenant limit (2 here).
	e.do(req{method: "POST", path: "/v1/webhooks", key: e.keyA, header: jsonHeader, body: `{"url": "https://example.com/2"}`})
	if resp := e.do(req{method: "POST", path: "/v1/webhooks", key: e.keyA, header: jsonHeader, body: `{"url": "https://example.com/3"}`}); resp.StatusCode != http.StatusConflict {
		t.Errorf("third webhook: %d, want 409 webhook-limit", resp.StatusCode)
	}
	if resp := e.do(req{method: "DELETE", path: "/v1/webhooks/" + made.ID, key: e.keyA}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d", resp.StatusCode)
	}
	if resp := e.do(req{method: "GET", path: "/v1/webhooks/" + made.ID + "/deliveries", key: e.keyA}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deliveries of a deleted webhook: %d", resp.StatusCode)
	}
	// Old clients: /v1/events without cursor is still the abuse list.
	if resp := e.do(req{method: "GET", path: "/v1/events", key: e.keyA}); resp.StatusCode != http.StatusOK {
		t.Errorf("abuse events: %d", resp.StatusCode)
	} else if b := readBody(t, resp); strings.Contains(string(b), "session.created") {
		t.Errorf("the abuse list shows feed events: %s", b)
	}
}

// Without a webhook service the routes are 501.
func TestWebhooksDisabled(t *testing.T) {
	e := newEnv(t)
	if resp := e.do(req{method: "GET", path: "/v1/webhooks", key: e.keyA}); resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("%d, want 501", resp.StatusCode)
	}
}

func addTenantKey(t *testing.T, e *env, tn *airlock.Tenant) (string, *airlock.APIKey) {
	t.Helper()
	secret, k := airlock.NewAPIKey(tn.ID, "", e.clock.Now())
	if err := e.store.CreateAPIKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return secret, k
}
