package tracing

import (
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport is an http.RoundTripper that starts a forward span for each
// request (a child of the request context's span), sends the W3C
// traceparent on, and ends the span when the response body is read to
// its end or closed (so a streamed response is timed whole). The fleet's
// reverse proxy to another node uses it.
type Transport struct {
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Node, if set, names the node the requests go to (airlock.node).
	Node string
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper. It does not change r: the
// request sent is a clone with the traceparent header.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx, span := Tracer().Start(r.Context(), SpanForward,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("server.address", r.URL.Host),
			attribute.String("url.path", r.URL.Path),
		))
	if t.Node != "" {
		SetNode(span, t.Node)
	}
	out := r.Clone(ctx)
	propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := base.RoundTrip(out)
	if err != nil {
		Fail(span, err)
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		// An upgraded connection's body is the connection itself
		// (an io.ReadWriteCloser the proxy needs as it is).
		span.End()
		return resp, nil
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// spanBody ends its span at EOF, at a read error or at Close.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if err != io.EOF {
			Fail(b.span, err)
		}
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *spanBody) end() { b.once.Do(func() { b.span.End() }) }
