package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/airlockhq/airlock/internal/tracing"
)

// TraceConfig configures OpenTelemetry tracing.
type TraceConfig struct {
	// OTLPEndpoint is the OTLP/HTTP receiver; off when empty.
	OTLPEndpoint string
	// Node is this node's name in traces (default: the host name).
	Node string
}

// setup starts tracing; the returned func flushes and stops it.
func (o TraceConfig) setup(ctx context.Context, logger *slog.Logger) (func(), error) {
	node := o.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	cfg := tracing.Config{Endpoint: o.OTLPEndpoint, Node: node}
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
