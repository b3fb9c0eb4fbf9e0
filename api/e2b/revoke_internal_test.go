package e2b

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A revoked key is refused on the control plane (X-API-KEY) and so are
// the sandbox tokens issued to it, at their next use; a token of another
// key, or one whose key part was swapped, is refused too.
func TestRevokedKeyAndItsTokens(t *testing.T) {
	s, st := fakeServer(t)
	control := func() int {
		req := httptest.NewRequest("GET", "/sandboxes/sbx", nil)
		req.Header.Set(headerAPIKey, "key")
		return serve(s, req).Code
	}
	health := func(envd, traffic string) int {
		req := httptest.NewRequest("GET", "/health", nil)
		req.Header.Set(headerSandboxID, "sbx")
		req.Header.Set(headerSandboxPort, portEnvd)
		if envd != "" {
			req.Header.Set(headerAccessToken, envd)
		}
		if traffic != "" {
			req.Header.Set(headerTrafficToken, traffic)
		}
		return serve(s, req).Code
	}
	envd := s.token(purposeEnvd, "sbx", fakeKeyID)
	traffic := s.token(purposeTraffic, "sbx", fakeKeyID)
	if !strings.HasPrefix(envd, fakeKeyID+".") {
		t.Fatalf("token %q does not name its key", envd)
	}
	if c := control(); c != http.StatusOK {
		t.Fatalf("control plane with the key: %d", c)
	}
	if c := health(envd, ""); c != http.StatusNoContent {
		t.Fatalf("health with the envd token: %d", c)
	}
	other := s.token(purposeEnvd, "sbx", "other-key")
	swapped := "other-key" + envd[len(fakeKeyID):]
	for name, tok := range map[string]string{"another key's token": other, "key part swapped": swapped, "no key part": envd[len(fakeKeyID)+1:]} {
		if c := health(tok, ""); c != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, c)
		}
	}

	st.revoke()
	if c := control(); c != http.StatusUnauthorized {
		t.Errorf("control plane with the revoked key: %d, want 401", c)
	}
	if c := health(envd, ""); c != http.StatusUnauthorized {
		t.Errorf("health with the revoked key's envd token: %d, want 401", c)
	}
	if c := health("", traffic); c != http.StatusUnauthorized {
		t.Errorf("health with the revoked key's traffic token: %d, want 401", c)
	}
}
