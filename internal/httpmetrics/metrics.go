package httpmetrics

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Unmatched is the route of a request no route matched.
const Unmatched = "unmatched"

// Metrics are the request counter and the duration histogram.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	route    func(*http.Request) string
}

// New registers the metrics on reg. route names a request's route (a
// pattern such as /v1/sessions/{id}, from a fixed set); "" counts as
// Unmatched.
func New(reg prometheus.Registerer, route func(*http.Request) string) (*Metrics, error) {
	if reg == nil || route == nil {
		return nil, errors.New("httpmetrics: a registerer and a route func are required")
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its response (streams included), by route pattern and method.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route", "method"}),
		route: route,
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Wrap counts and times every request h answers.
func (m *Metrics) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		route := m.route(r) // before h, which may change r's URL
		if route == "" {
			route = Unmatched
		}
		rec := &recorder{ResponseWriter: w}
		defer func() {
			method := methodLabel(r.Method)
			code := rec.status
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
			m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		}()
		h.ServeHTTP(rec, r)
	})
}

// methodLabel keeps the label's values few: a method no route has is
// "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// recorder keeps the status a handler wrote; it passes on Flush and
// Hijack, and Unwrap gives http.ResponseController the writer beneath.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
