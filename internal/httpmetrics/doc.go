// Package httpmetrics counts and times the HTTP requests a server
// answers, by route pattern (never the raw path, so IDs do not become
// label values), method and status, as Prometheus metrics. It owns the
// airlock_http_* metrics and the response writer that records the
// status; it knows no route itself: the caller names a request's route.
package httpmetrics
