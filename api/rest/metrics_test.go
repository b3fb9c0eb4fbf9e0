package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/api/rest"
)

// metricsHandler stands in for the Prometheus handler.
var metricsHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte("airlock_up 1\n"))
})

const testMetricsKey = "m3tr1cs-key-0123456789"

func TestMetricsAccess(t *testing.T) {
	withMetrics := func(key string, loopback bool) func(*rest.Config) {
		return func(c *rest.Config) {
			c.Metrics = metricsHandler
			c.MetricsKey = key
			c.LoopbackOnly = loopback
		}
	}
	tests := []struct {
		name     string
		key      string // the server's metrics key
		loopback bool
		auth     string // Authorization sent; "A" for tenant A's API key
		status   int
		slug     string
	}{
		{"no key, loopback", "", true, "", 200, ""},
		{"no key, loopback, any header", "", true, "Bearer whatever", 200, ""},
		{"no key, beyond loopback", "", false, "", 403, "metrics-key-required"},
		{"no key, beyond loopback, a tenant's key", "", false, "A", 403, "metrics-key-required"},
		{"key, right", testMetricsKey, false, "Bearer " + testMetricsKey, 200, ""},
		{"key, scheme in lower case", testMetricsKey, false, "bearer " + testMetricsKey, 200, ""},
		{"key on loopback, right", testMetricsKey, true, "Bearer " + testMetricsKey, 200, ""},
		{"key on loopback, none sent", testMetricsKey, true, "", 401, "unauthorized"},
		{"key, none sent", testMetricsKey, false, "", 401, "unauthorized"},
		{"key, wrong", testMetricsKey, false, "Bearer " + testMetricsKey + "x", 401, "unauthorized"},
		{"key, prefix", testMetricsKey, false, "Bearer " + testMetricsKey[:10], 401, "unauthorized"},
		{"key, a tenant's key", testMetricsKey, false, "A", 401, "unauthorized"},
		{"key, basic", testMetricsKey, false, "Basic " + testMetricsKey, 401, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, withMetrics(tt.key, tt.loopback))
			h := map[string]string{}
			switch tt.auth {
			case "":
			case "A":
				h["Authorization"] = "Bearer " + e.keyA
			default:
				h["Authorization"] = tt.auth
			}
			resp := e.do(req{method: "GET", path: "/metrics", header: h})
			if tt.status == 200 {
				body := readBody(t, resp)
				if resp.StatusCode != 200 || string(body) != "airlock_up 1\n" {
					t.Fatalf("%d %q", resp.StatusCode, body)
				}
				return
			}
			p := wantProblem(t, resp, tt.status, tt.slug)
			switch tt.status {
			case 401:
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
				}
			case 403:
				if !strings.Contains(p.Detail, "--metrics-key") {
					t.Errorf("detail %q does not tell the operator to set --metrics-key", p.Detail)
				}
			}
			if strings.Contains(p.Detail, testMetricsKey) {
				t.Errorf("the detail shows the key")
			}
		})
	}
}

// Without a metrics handler /metrics is 404, whatever the key.
func TestMetricsDisabled(t *testing.T) {
	e := newEnv(t)
	wantProblem(t, e.do(req{method: "GET", path: "/metrics"}), 404, "metrics-disabled")
}

func TestMetricsKeyValidated(t *testing.T) {
	e := setup(t)
	for _, bad := range []string{"short", "has space in the middle", "tab\tin-the-middle-key", strings.Repeat("k", 600), "k\u00e9y-not-ascii-0123"} {
		_, err := rest.New(rest.Config{Store: e.store, Blobs: e.blobs, Executor: e.exec, SigningKey: e.key, Metrics: metricsHandler, MetricsKey: bad})
		if err == nil || !strings.Contains(err.Error(), "metrics key") {
			t.Errorf("metrics key %q: %v", bad, err)
		}
		if rest.ValidateMetricsKey(bad) == nil {
			t.Errorf("ValidateMetricsKey(%q) passed", bad)
		}
	}
	if err := rest.ValidateMetricsKey(testMetricsKey); err != nil {
		t.Error(err)
	}
}
