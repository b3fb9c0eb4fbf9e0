package rest_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestAuthenticate: the tenant of a bearer key or an E2B X-API-Key; a
// missing, malformed or unknown key is ErrUnauthorized.
func TestAuthenticate(t *testing.T) {
	e := setup(t)
	for _, c := range []struct {
		name, auth, apiKey, want string
	}{
		{"bearer A", "Bearer " + e.keyA, "", e.tenantA.ID},
		{"x-api-key B", "", e.keyB, e.tenantB.ID},
		{"x-api-key first", "Bearer " + e.keyA, e.keyB, e.tenantB.ID},
		{"none", "", "", ""},
		{"unknown", "Bearer not-a-key", "", ""},
		{"not bearer", "Basic " + e.keyA, "", ""},
		{"too long", "", strings.Repeat("k", 600), ""},
	} {
		r := httptest.NewRequest("POST", "/v1/sessions", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		if c.apiKey != "" {
			r.Header.Set("X-API-Key", c.apiKey)
		}
		got, err := e.server.Authenticate(r)
		if c.want == "" {
			if airlock.ErrorCode(err) != airlock.EUNAUTHORIZED {
				t.Errorf("%s: %q %v, want unauthorized", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
}
