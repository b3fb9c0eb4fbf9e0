package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The spans of a request, in the order they nest: receive (the HTTP
// server), place (choosing the node), forward (the call to another
// node), then on the node that runs it acquire (getting a sandbox), run
// (handing in and running the program) and collect (stopping the
// sandbox, reading its stats and artifacts).
const (
	SpanReceive = "receive"
	SpanPlace   = "place"
	SpanForward = "forward"
	SpanAcquire = "acquire"
	SpanRun     = "run"
	SpanCollect = "collect"
)

// instrumentation is the tracer's name.
const instrumentation = "github.com/airlockhq/airlock"

// propagator reads and writes W3C traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// Tracer is Airlock's tracer on the global provider (see Setup).
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Start starts a span named name as a child of ctx's span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// StartPlace starts the place span: the fleet calls it around choosing a
// node, with the node chosen set on the span (SetNode) before End.
func StartPlace(ctx context.Context) (context.Context, trace.Span) {
	return Start(ctx, SpanPlace)
}

// LocalNode names this node in a place span of a single node.
const LocalNode = "local"

// Place records a placement that chose this node at once (a single
// node): a place span with nothing inside.
func Place(ctx context.Context, node string) {
	_, span := StartPlace(ctx)
	SetNode(span, node)
	span.End()
}

// SetNode names the node a span chose or went to.
func SetNode(span trace.Span, node string) {
	span.SetAttributes(attribute.String("airlock.node", node))
}

// Fail marks span failed with err (nil: nothing).
func Fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// TraceID is the trace ID of ctx's span in hex, or "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
