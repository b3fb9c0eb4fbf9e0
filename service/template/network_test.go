package template_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// TestTemplateNetworkRefused: through the API, a Dockerfile build's
// network is refused with a problem, and nothing is recorded, when the
// node has no egress proxy (403 network-unavailable), when its allow list
// is empty or names an address or a bare top-level wildcard (400), when
// it goes with a registry import (400), and on the operator's route
// (400: a build's network is a tenant's); another tenant's and a revoked
// key get no further than for any template request.
func TestTemplateNetworkRefused(t *testing.T) {
	s := teststack.New(t, teststack.Options{Templates: &node.TemplatesConfig{}})
	ctx := context.Background()
	a := s.NewTenant(t, "a")
	opSecret, opKey := airlock.NewAPIKey("", "", time.Now())
	opKey.Role, opKey.Name = airlock.RoleAdmin, "operator"
	if err := s.Store.CreateAPIKey(ctx, opKey); err != nil {
		t.Fatal(err)
	}
	revoked := s.NewTenant(t, "r")
	if _, err := s.Store.RevokeAPIKey(ctx, keyID(t, s, revoked)); err != nil {
		t.Fatal(err)
	}
	post := func(path, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p struct {
			Type string `json:"type"`
		}
		json.Unmarshal(b, &p)
		if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("POST %s: %d with %s, want a problem: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		return resp.StatusCode, p.Type
	}
	for _, c := range []struct {
		what, path, key, body string
		status                int
		typ                   string
	}{
		{"no egress proxy", "/v1/templates", a.Key, `{"name": "n1", "dockerfile": "FROM base\nRUN true\n", "network": {"allow": ["pkgs.example.com"]}}`, 403, "network-unavailable"},
		{"an empty allow list", "/v1/templates", a.Key, `{"name": "n2", "dockerfile": "FROM base\n", "network": {"allow": []}}`, 400, "invalid-network"},
		{"an address", "/v1/templates", a.Key, `{"name": "n3", "dockerfile": "FROM base\n", "network": {"allow": ["10.0.0.1:80"]}}`, 400, "invalid-allow-list"},
		{"a top-level wildcard", "/v1/templates", a.Key, `{"name": "n4", "dockerfile": "FROM base\n", "network": {"allow": ["*.com"]}}`, 400, "invalid-allow-list"},
		{"with from_image", "/v1/templates", a.Key, `{"name": "n5", "from_image": "127.0.0.1:1/x:1", "network": {"allow": ["a.example.com"]}}`, 400, "invalid-template-source"},
		{"an unknown field", "/v1/templates", a.Key, `{"name": "n6", "dockerfile": "FROM base\n", "network": {"allow": ["a.example.com"], "deny": []}}`, 400, ""},
		{"the operator's route", "/v1/admin/templates", opSecret, `{"name": "n7", "dockerfile": "FROM base\n", "network": {"allow": ["a.example.com"]}}`, 400, "invalid-template-source"},
		{"a revoked key", "/v1/templates", revoked.Key, `{"name": "n8", "dockerfile": "FROM base\n", "network": {"allow": ["a.example.com"]}}`, 401, ""},
	} {
		code, typ := post(c.path, c.key, c.body)
		if code != c.status || (c.typ != "" && !strings.HasSuffix(typ, c.typ)) {
			t.Errorf("%s: %d %q, want %d %q", c.what, code, typ, c.status, c.typ)
		}
	}
	if l, err := a.Client.ListTemplates(ctx); err != nil || len(l) != 0 {
		t.Errorf("refused requests recorded templates: %+v %v", l, err)
	}
}
