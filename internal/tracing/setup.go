package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// tracesPath is the OTLP/HTTP path of trace exports, added to an
// endpoint given without a path.
const tracesPath = "/v1/traces"

// Config configures Setup.
type Config struct {
	// Endpoint is the OTLP/HTTP receiver: http(s)://HOST:PORT, with an
	// optional path (default /v1/traces). Empty: no export, no-op tracer.
	Endpoint string
	// ServiceName is the service.name of the spans (default airlockd).
	ServiceName string
	// Node is this node's name (the service.instance.id of the spans).
	Node string
	// ExportTimeout bounds one export (default 10 s).
	ExportTimeout time.Duration
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return nil
	}
	_, err := c.endpointURL()
	return err
}

func (c Config) endpointURL() (string, error) {
	u, err := url.Parse(c.Endpoint)
	switch {
	case err != nil:
		return "", errors.New("tracing: the OTLP endpoint does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("tracing: the OTLP endpoint must be an http:// or https:// URL")
	case u.Host == "":
		return "", errors.New("tracing: the OTLP endpoint names no host")
	case u.User != nil:
		return "", errors.New("tracing: the OTLP endpoint must not carry credentials (set OTEL_EXPORTER_OTLP_HEADERS)")
	case u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("tracing: the OTLP endpoint must have no query or fragment")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = tracesPath
	}
	return u.String(), nil
}

// Provider is what Setup made; Shutdown flushes and stops it.
type Provider struct {
	tp *sdktrace.TracerProvider // nil: no-op
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Shutdown exports what is left and stops the exporter. A no-op
// provider has nothing to do.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush exports every span ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Setup makes the process's tracer provider: with an endpoint, spans are
// batched and exported over OTLP/HTTP (the OTEL_EXPORTER_OTLP_HEADERS
// variable adds headers, e.g. for authentication); without one the
// global provider stays OpenTelemetry's no-op. It sets the global
// provider, which Tracer uses.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Endpoint == "" {
		return &Provider{}, nil
	}
	endpoint, _ := cfg.endpointURL()
	timeout := cfg.ExportTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "airlockd"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if cfg.Node != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(cfg.Node))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
	)
	otel.SetTracerProvider(tp)
	return &Provider{tp: tp}, nil
}

// Redacted is the endpoint for logs: scheme, host and path only.
func (c Config) Redacted() string {
	u, err := url.Parse(c.Endpoint)
	if err != nil || c.Endpoint == "" {
		return ""
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
}
