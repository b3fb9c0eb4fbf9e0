package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

func TestHealth(t *testing.T) {
	e := newEnv(t)
	var h map[string]any
	decodeJSON(t, e.do(req{method: "GET", path: "/healthz"}), 200, &h)
	if h["status"] != "ok" {
		t.Errorf("healthz: %v", h)
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/readyz"}), 200, &h)
	if h["status"] != "ok" {
		t.Errorf("readyz: %v", h)
	}
	if _, ok := h["microvm"]; ok {
		t.Errorf("readyz names a microVM acceleration on a node without the backend: %v", h)
	}

	tests := []struct {
		name   string
		err    error
		detail string
	}{
		{"typed reason", airlock.Errorf(airlock.EUNAVAILABLE, "migrations are running"), "migrations are running"},
		{"plain error stays in the log", fmt.Errorf("ping 10.1.2.3:5432: password authentication failed"), "not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			e.setReady(func() error { return tt.err })
			defer e.setReady(nil)
			p := wantProblem(t, e.do(req{method: "GET", path: "/readyz"}), 503, "not-ready")
			if p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if !strings.Contains(e.logs.String(), tt.err.Error()) {
				t.Errorf("readiness failure not logged")
			}
		})
	}
}

// On a node with the microVM backend, /readyz says how its guests run;
// /healthz does not.
func TestReadyzMicroVM(t *testing.T) {
	for _, accel := range []string{"tcg", "kvm"} {
		t.Run(accel, func(t *testing.T) {
			e := newEnv(t, func(c *rest.Config) { c.MicroVM = accel })
			var h map[string]any
			decodeJSON(t, e.do(req{method: "GET", path: "/readyz"}), 200, &h)
			if h["microvm"] != accel {
				t.Errorf("readyz: %v, want microvm %q", h, accel)
			}
			h = nil
			decodeJSON(t, e.do(req{method: "GET", path: "/healthz"}), 200, &h)
			if _, ok := h["microvm"]; ok {
				t.Errorf("healthz: %v", h)
			}
		})
	}
}

// /readyz has one member per dependency, "ok" or its reason; one failing
// dependency makes it a 503 not-ready problem carrying the same members,
// and a reason that is not a typed one stays in the log.
func TestReadyzChecks(t *testing.T) {
	var storeErr, blobsErr error
	e := newEnv(t, func(c *rest.Config) {
		c.ReadyChecks = []rest.ReadyCheck{
			{Name: "store", Check: func(context.Context) error { return storeErr }},
			{Name: "runsc", Check: func(context.Context) error { return nil }},
			{Name: "blobs", Check: func(context.Context) error { return blobsErr }},
		}
	})
	var h map[string]any
	decodeJSON(t, e.do(req{method: "GET", path: "/readyz"}), 200, &h)
	if h["status"] != "ok" || h["store"] != "ok" || h["runsc"] != "ok" || h["blobs"] != "ok" {
		t.Errorf("all ready: %v", h)
	}
	storeErr = airlock.Errorf(airlock.EUNAVAILABLE, "unreachable")
	blobsErr = fmt.Errorf("dial tcp 10.1.2.3:9000: secret-detail")
	resp := e.do(req{method: "GET", path: "/readyz"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("store down: %d %s", resp.StatusCode, body)
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p["store"] != "unreachable" || p["runsc"] != "ok" || p["blobs"] != "not ready" || p["type"] == nil ||
		!strings.Contains(p["detail"].(string), "store: unreachable") {
		t.Errorf("store down: %s", body)
	}
	if strings.Contains(string(body), "secret-detail") || !strings.Contains(e.logs.String(), "secret-detail") {
		t.Errorf("an untyped error must be logged, not shown: %s", body)
	}
}

// A check of the warm level counts only for /readyz?warm=true: a node
// whose pool is still filling is ready, and not ready warm; a warm value
// that is not a boolean is a 400.
func TestReadyzWarm(t *testing.T) {
	var warming atomic.Bool
	e := newEnv(t, func(c *rest.Config) {
		c.ReadyChecks = []rest.ReadyCheck{{Name: "pool", Warm: true, Check: func(context.Context) error {
			if warming.Load() {
				return airlock.Errorf(airlock.EUNAVAILABLE, "warming: 1 of 3 ready")
			}
			return nil
		}}}
	})
	warming.Store(true)
	var h map[string]any
	decodeJSON(t, e.do(req{method: "GET", path: "/readyz"}), 200, &h)
	if _, ok := h["pool"]; ok {
		t.Errorf("plain /readyz ran the warm check: %v", h)
	}
	for _, q := range []string{"true", "1"} {
		p := wantProblem(t, e.do(req{method: "GET", path: "/readyz?warm=" + q}), 503, "not-ready")
		if p.Detail != "pool: warming: 1 of 3 ready" {
			t.Errorf("warm=%s: detail %q", q, p.Detail)
		}
	}
	h = nil
	decodeJSON(t, e.do(req{method: "GET", path: "/readyz?warm=false"}), 200, &h)
	wantProblem(t, e.do(req{method: "GET", path: "/readyz?warm=yes%27"}), 400, "invalid")
	warming.Store(false)
	h = nil
	decodeJSON(t, e.do(req{method: "GET", path: "/readyz?warm=true"}), 200, &h)
	if h["pool"] != "ok" {
		t.Errorf("warm /readyz: %v", h)
	}
}
