// Command airlockd is the Airlock server: the HTTP API, the execution
// manager and the gVisor backend of one node, on embedded defaults
// (SQLite and local directories under --state-dir; --store puts the
// metadata in PostgreSQL instead). It runs as root. Its flags fill a
// node.Config; package node assembles and runs the node.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/node"
)

func main() {
	jailer.RunIfAsked() // this binary run again as a microVM's jailer: execs QEMU, never returns
	f := newFlags(flag.CommandLine)
	flag.Parse()
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: %v\n", err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: bad --log-level: %v\n", err)
		os.Exit(2)
	}
	// Records logged with a request's context carry its trace_id and span_id.
	logger := slog.New(tracing.LogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	slog.SetDefault(logger)
	cfg.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg); err != nil {
		logger.Error("airlockd stopped", "err", err)
		os.Exit(1)
	}
}

// serve builds the node and runs it until ctx ends.
func serve(ctx context.Context, cfg node.Config) error {
	n, err := node.New(ctx, cfg)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}
