package httpmetrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlockhq/airlock/internal/httpmetrics"
)

// Requests are counted by the route's pattern, never the path, with the
// status the handler wrote (also when it only wrote a body, or
// flushed a stream), and timed.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
	})
	m, err := httpmetrics.New(reg, func(r *http.Request) string {
		_, p := mux.Handler(r)
		_, path, _ := strings.Cut(p, " ")
		return path
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Wrap(mux))
	defer srv.Close()
	for _, p := range []string{"/v1/sessions/a", "/v1/sessions/b", "/v1/sessions/missing", "/stream", "/nowhere"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	req, _ := http.NewRequest("BREW", srv.URL+"/v1/sessions/a", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	want := `
# HELP airlock_http_requests_total HTTP requests answered, by route pattern, method and status code.
# TYPE airlock_http_requests_total counter
airlock_http_requests_total{code="200",method="GET",route="/stream"} 1
airlock_http_requests_total{code="200",method="GET",route="/v1/sessions/{id}"} 2
airlock_http_requests_total{code="404",method="GET",route="/v1/sessions/{id}"} 1
airlock_http_requests_total{code="404",method="GET",route="unmatched"} 1
airlock_http_requests_total{code="405",method="other",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "airlock_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "airlock_http_request_duration_seconds"); n != 4 {
		t.Errorf("%d duration series, want 4 (route and method)", n)
	}
}
