// Package tracing owns Airlock's OpenTelemetry spans: the tracer
// provider (Setup: an OTLP/HTTP exporter when an endpoint is configured,
// else OpenTelemetry's no-op tracer, which records nothing), the names of
// a request's spans (receive, place, forward, acquire, run, collect),
// the HTTP server middleware that starts "receive" and continues a W3C
// traceparent sent in, the http.RoundTripper that starts "forward" and
// sends the traceparent on (for a reverse proxy to another node), and a
// slog handler that adds trace_id and span_id to log records.
//
// Propagation is W3C Trace Context only, and works with the no-op tracer
// too: a request that carries a traceparent keeps its trace ID in the
// logs and the execution record even when nothing is exported.
//
// It knows nothing of sandboxes, tenants or the store; callers start
// spans around their own phases. It must not import any Airlock package.
package tracing
