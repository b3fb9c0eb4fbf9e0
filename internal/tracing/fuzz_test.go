package tracing_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/airlockhq/airlock/internal/tracing"
)

var hexTraceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// FuzzMiddlewareTraceparent: whatever traceparent and tracestate a
// client sends, the middleware serves the request, and the trace ID the
// handler sees is either none or 32 hex digits (never the header echoed).
func FuzzMiddlewareTraceparent(f *testing.F) {
	f.Add("00-"+callerTrace+"-"+callerSpan+"-01", "vendor=x")
	f.Add("ff-"+callerTrace+"-"+callerSpan+"-01", "")
	f.Add("00-"+callerTrace+"-0000000000000000-01", "a=b,c=d")
	f.Add("", "")
	f.Add("00-xyz", "=,=,")
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		var seen string
		called := false
		h := tracing.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			called = true
			seen = tracing.TraceID(r.Context())
			w.WriteHeader(http.StatusNoContent)
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Traceparent"] = []string{traceparent}
		req.Header["Tracestate"] = []string{tracestate}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !called || rec.Code != http.StatusNoContent {
			t.Fatalf("handler called %v, status %d", called, rec.Code)
		}
		if seen != "" && !hexTraceID.MatchString(seen) {
			t.Fatalf("trace ID %q from traceparent %q", seen, traceparent)
		}
	})
}
