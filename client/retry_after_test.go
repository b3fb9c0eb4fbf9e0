package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// A problem's Retry-After header becomes Error.RetryAfter and the domain
// error's RetryAfter, in seconds or as an HTTP date; nonsense is 0.
func TestRetryAfterFromProblem(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		header   string
		min, max time.Duration
	}{
		{"", 0, 0},
		{"7", 7 * time.Second, 7 * time.Second},
		{" 1 ", time.Second, time.Second},
		{"0", 0, 0},
		{future, 80 * time.Second, 91 * time.Second},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, 0}, // passed
		{"-5", 0, 0},
		{"1.5", 0, 0},
		{"soon", 0, 0},
		{"99999999999999999999999", 24 * time.Hour, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				writeProblem(w, 429, "session-quota", "Too Many Requests", "the tenant has 8 live sessions", airlock.ERATELIMITED)
			}))
			defer srv.Close()
			c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Execute(context.Background(), airlock.ExecuteRequest{Language: airlock.Bash, Code: "true"})
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *client.Error", err)
			}
			if ce.RetryAfter < tt.min || ce.RetryAfter > tt.max {
				t.Errorf("Retry-After %q: RetryAfter %v, want %v to %v", tt.header, ce.RetryAfter, tt.min, tt.max)
			}
			if got := airlock.RetryAfterOf(err); got != ce.RetryAfter {
				t.Errorf("airlock.RetryAfterOf = %v, want %v", got, ce.RetryAfter)
			}
			if airlock.ErrorCode(err) != airlock.ERATELIMITED {
				t.Errorf("code %q", airlock.ErrorCode(err))
			}
		})
	}
}

// A streamed call refused before its stream starts carries Retry-After too.
func TestRetryAfterOnStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		writeProblem(w, 503, "node-busy", "Service Unavailable", "32 live sessions on this node", airlock.EUNAVAILABLE)
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ExecStreaming(context.Background(), "s1", airlock.SessionExecRequest{Shell: "true"}, client.ExecStream{})
	if got := airlock.RetryAfterOf(err); got != 3*time.Second {
		t.Errorf("RetryAfterOf(%v) = %v, want 3s", err, got)
	}
}
