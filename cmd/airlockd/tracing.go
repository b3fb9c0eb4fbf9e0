package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/airlockhq/airlock/internal/tracing"
)

// traceOptions configure OpenTelemetry tracing.
type traceOptions struct {
	otlpEndpoint string
	node         string
}

func (o *traceOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", envOr("AIRLOCK_OTLP_ENDPOINT", ""),
		"export OpenTelemetry traces over OTLP/HTTP to this receiver, http(s)://HOST:PORT[/path] (default path /v1/traces; "+
			"OTEL_EXPORTER_OTLP_HEADERS adds headers); off when empty (env AIRLOCK_OTLP_ENDPOINT)")
	fs.StringVar(&o.node, "node-name", envOr("AIRLOCK_NODE_NAME", ""),
		"this node's name in traces (service.instance.id; default the host name) (env AIRLOCK_NODE_NAME)")
}

// setup starts tracing; the returned func flushes and stops it.
func (o traceOptions) setup(ctx context.Context, logger *slog.Logger) (func(), error) {
	node := o.node
	if node == "" {
		node, _ = os.Hostname()
	}
	cfg := tracing.Config{Endpoint: o.otlpEndpoint, Node: node}
	p, err := tracing.Setup(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	if p.Enabled() {
		logger.Info("exporting traces over OTLP/HTTP", "endpoint", cfg.Redacted(), "node", node)
	}
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(cctx); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	}, nil
}
