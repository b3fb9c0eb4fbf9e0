package problem_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

var codes = []string{airlock.ECONFLICT, airlock.EINTERNAL, airlock.EINVALID, airlock.ENOTFOUND,
	airlock.EUNAUTHORIZED, airlock.EFORBIDDEN, airlock.ETOOLARGE, airlock.EUNAVAILABLE,
	airlock.ENOTIMPLEMENTED, airlock.ERATELIMITED, airlock.EUNPROCESSABLE}

// Every code has a status of its own, and the status maps back to it.
func TestStatusTableRoundTrips(t *testing.T) {
	seen := map[int]string{}
	for _, c := range codes {
		if !airlock.KnownCode(c) {
			t.Errorf("KnownCode(%q) = false", c)
		}
		s := problem.Status(c)
		if s < 400 || s > 599 {
			t.Errorf("Status(%q) = %d", c, s)
		}
		if other, dup := seen[s]; dup {
			t.Errorf("%q and %q share status %d", c, other, s)
		}
		seen[s] = c
		if back := problem.CodeFor(s); back != c {
			t.Errorf("CodeFor(Status(%q)) = %q", c, back)
		}
	}
	if airlock.KnownCode("teapot") || problem.Status("teapot") != 500 {
		t.Error("an unknown code is known, or not a 500")
	}
	for status, want := range map[int]string{502: airlock.EUNAVAILABLE, 504: airlock.EUNAVAILABLE, 418: airlock.EINVALID, 507: airlock.EINTERNAL} {
		if got := problem.CodeFor(status); got != want {
			t.Errorf("CodeFor(%d) = %q, want %q", status, got, want)
		}
	}
}

// WriteError and Decode are each other's inverse for a client-safe
// error, and an internal error's text never reaches the body.
func TestWriteErrorDecode(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		internal bool
		want     *airlock.Error
	}{
		{"quota", airlock.Problem(airlock.ERATELIMITED, "run-quota", "too many runs").With("limit", 3.0).RetryLater(1500 * time.Millisecond), false,
			&airlock.Error{Code: airlock.ERATELIMITED, Type: "run-quota", Message: "too many runs", RetryAfter: 2 * time.Second, Extensions: map[string]any{"limit": 3.0}}},
		{"wrapped", errors.Join(errors.New("x"), airlock.Errorf(airlock.ENOTFOUND, "no such session")), false,
			&airlock.Error{Code: airlock.ENOTFOUND, Type: "not-found", Message: "no such session"}},
		{"internal", errors.New("disk on fire at /secret"), true,
			&airlock.Error{Code: airlock.EINTERNAL, Type: "internal", Message: "internal error"}},
		{"unknown code", &airlock.Error{Code: "teapot", Message: "short and stout"}, true,
			&airlock.Error{Code: airlock.EINTERNAL, Type: "internal", Message: "internal error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if got := problem.WriteError(w, tt.err); got != tt.internal {
				t.Errorf("internal = %v, want %v", got, tt.internal)
			}
			resp := w.Result()
			if ct := resp.Header.Get("Content-Type"); ct != problem.ContentType {
				t.Errorf("Content-Type %q", ct)
			}
			if resp.StatusCode != problem.Status(tt.want.Code) {
				t.Errorf("status %d, want %d", resp.StatusCode, problem.Status(tt.want.Code))
			}
			got, ok := problem.Decode(resp).(*airlock.Error)
			if !ok {
				t.Fatalf("Decode = %v", problem.Decode(resp))
			}
			if got.Code != tt.want.Code || got.Type != tt.want.Type || got.Message != tt.want.Message || got.RetryAfter != tt.want.RetryAfter ||
				len(got.Extensions) != len(tt.want.Extensions) || (tt.want.Extensions != nil && got.Extensions["limit"] != tt.want.Extensions["limit"]) {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A problem's own members are never overwritten by an extension.
func TestExtensionsCannotShadowMembers(t *testing.T) {
	p := problem.New(airlock.EINVALID, "", 0, "bad")
	p.Extensions = map[string]any{"status": 200, "code": "ok", "extra": "x"}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back problem.Problem
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status != http.StatusBadRequest || back.Code != airlock.EINVALID || back.Extensions["extra"] != "x" || len(back.Extensions) != 1 {
		t.Fatalf("round trip of %s = %+v", b, back)
	}
}
