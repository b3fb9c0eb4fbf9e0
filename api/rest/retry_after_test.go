package rest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/client"
)

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "1",
		time.Nanosecond:         "1",
		time.Second:             "1",
		time.Second + 1:         "2",
		1500 * time.Millisecond: "2",
		90 * time.Second:        "90",
		-time.Second:            "1",
	} {
		if got := rest.RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// Every problem whose error chain says when to retry sends Retry-After in
// whole seconds, rounded up; others send none.
func TestRetryAfterHeader(t *testing.T) {
	e := newEnv(t)
	quota := airlock.Problem(airlock.ERATELIMITED, "rate-limited", "too many runs")
	busy := airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "the node is busy")
	tests := []struct {
		name   string
		err    error
		status int
		want   string // "" for no header
	}{
		{"rate limited", quota.RetryLater(1500 * time.Millisecond), 429, "2"},
		{"busy", busy.RetryLater(10 * time.Second), 503, "10"},
		{"wrapped", fmt.Errorf("admit: %w", busy.RetryLater(300*time.Millisecond)), 503, "1"},
		{"deeper in the chain", &airlock.Error{Code: airlock.EUNAVAILABLE, Message: "no sandbox", Err: quota.RetryLater(4 * time.Second)}, 503, "4"},
		{"internal", &airlock.Error{Code: airlock.EINTERNAL, Message: "x", RetryAfter: time.Second}, 500, "1"},
		{"none", busy, 503, ""},
		{"plain error", errors.New("boom"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
				return nil, tt.err
			})
			resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: okBody})
			readBody(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.want {
				t.Errorf("Retry-After %q, want %q", got, tt.want)
			}
		})
	}
}

// Session routes answer the same way, and the Go client and DecodeProblem
// map the header back onto the domain error.
func TestRetryAfterRoundTrip(t *testing.T) {
	sess := &fakeSessions{err: airlock.Problem(airlock.ERATELIMITED, "session-quota", "the tenant has 8 live sessions").RetryLater(2500 * time.Millisecond)}
	e := newEnv(t, withSessions(sess))

	resp := e.do(req{method: "POST", path: "/v1/sessions", key: e.keyA, body: `{}`})
	if got := resp.Header.Get("Retry-After"); got != "3" {
		t.Errorf("session create: Retry-After %q, want 3", got)
	}
	derr := rest.DecodeProblem(resp)
	var ae *airlock.Error
	if !errors.As(derr, &ae) || ae.RetryAfter != 3*time.Second || ae.Type != "session-quota" {
		t.Errorf("DecodeProblem: %#v", derr)
	}

	c, err := client.New(client.Config{BaseURL: e.srv.URL, APIKey: e.keyA})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{})
	if got := airlock.RetryAfterOf(err); got != 3*time.Second {
		t.Errorf("client: RetryAfterOf(%v) = %v, want 3s", err, got)
	}
	e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "busy").RetryLater(time.Minute)
	})
	_, err = c.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Python, Code: "1"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.RetryAfter != time.Minute || ce.Status != http.StatusServiceUnavailable ||
		!strings.HasSuffix(ce.Type, "node-busy") {
		t.Errorf("client execute: %#v", err)
	}
}
