package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

func TestUsage(t *testing.T) {
	over := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/usage" || r.Header.Get("Authorization") != "Bearer "+testKey {
			writeProblem(w, 404, "route-not-found", "Not Found", r.URL.Path, airlock.ENOTFOUND)
			return
		}
		if over {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "40")
			w.WriteHeader(429)
			json.NewEncoder(w).Encode(map[string]any{"type": "urn:airlock:problem:execution-rate-quota", "title": "Too Many Requests",
				"status": 429, "detail": "over", "code": "rate_limited", "quota": "executions_per_minute", "limit": 3, "used": 3, "unit": "executions"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(airlock.Usage{TenantID: "t1", At: time.Now(), Quotas: []airlock.QuotaUsage{
			{Quota: "sessions", Unit: "sessions", Window: "concurrent", Limit: 8, Used: 2, Remaining: 6, Source: "default"}}})
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u.TenantID != "t1" || len(u.Quotas) != 1 || u.Quotas[0].Remaining != 6 {
		t.Errorf("usage %+v", u)
	}
	over = true
	_, err = c.Usage(context.Background())
	var ce *client.Error
	if !errors.As(err, &ce) || ce.RetryAfter != 40*time.Second || ce.Extensions["quota"] != "executions_per_minute" || ce.Extensions["limit"] != 3.0 {
		t.Fatalf("refusal %#v", err)
	}
	if ext := airlock.ExtensionsOf(err); ext["used"] != 3.0 || ext["code"] != nil {
		t.Errorf("domain error's extensions %v", ext)
	}
}
