package mcp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/mcp"
)

// stateKeys holds one key of each state: live, revoked, expired, and an
// operator key.
type stateKeys struct{}

func (stateKeys) APIKeyByHash(_ context.Context, hash string) (*airlock.APIKey, error) {
	past := time.Now().Add(-time.Minute)
	switch hash {
	case airlock.HashAPIKey("live"):
		return &airlock.APIKey{ID: "k1", TenantID: "t1", Role: airlock.RoleTenant}, nil
	case airlock.HashAPIKey("revoked"):
		return &airlock.APIKey{ID: "k2", TenantID: "t1", Role: airlock.RoleTenant, RevokedAt: &past}, nil
	case airlock.HashAPIKey("expired"):
		return &airlock.APIKey{ID: "k3", TenantID: "t1", Role: airlock.RoleTenant, ExpiresAt: &past}, nil
	case airlock.HashAPIKey("admin"):
		return &airlock.APIKey{ID: "k4", Role: airlock.RoleAdmin}, nil
	}
	return nil, airlock.ErrNotFound
}

func (stateKeys) TenantByID(_ context.Context, id string) (*airlock.Tenant, error) {
	if id == "t1" {
		return &airlock.Tenant{ID: "t1", Name: "t"}, nil
	}
	return nil, airlock.ErrNotFound
}

// /mcp refuses a revoked, an expired and an operator key with 401, and
// takes a live one.
func TestKeyStates(t *testing.T) {
	h, err := mcp.NewHandler(mcp.HandlerConfig{API: fakeAPI(), Keys: stateKeys{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for key, want := range map[string]int{"live": 200, "revoked": 401, "expired": 401, "admin": 401, "unknown": 401} {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(init))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("key %s: %d, want %d: %s", key, rec.Code, want, rec.Body)
		}
		if want == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("key %s: 401 without WWW-Authenticate", key)
		}
	}
}
