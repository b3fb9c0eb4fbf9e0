// Command airlockd is the Airlock server: the HTTP API, the execution
// manager and the gVisor backend of one node, on embedded defaults
// (SQLite and local directories under --state-dir; --store puts the
// metadata in PostgreSQL instead). It runs as root. Its settings come
// from flags, AIRLOCK_* environment variables and a TOML --config file
// (settings.go has the one precedence rule) and fill a node.Config;
// package node assembles and runs the node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
	"github.com/airlockhq/airlock/node"
)

func main() {
	jailer.RunIfAsked() // this binary run again as a microVM's jailer: execs QEMU, never returns
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// run is airlockd with its arguments and environment: the exit code.
func run(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	if len(args) > 0 && args[0] == "config" {
		return configCommand(args[1:], stdout, stderr, env)
	}
	f := newFlags()
	warnings, err := f.load(args, env)
	if errors.Is(err, flag.ErrHelp) {
		f.usage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlockd: %v\n(airlockd -h lists the settings)\n", err)
		return 2
	}
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(stderr, "airlockd: %v\n", err)
		return 2
	}
	level, _ := parseLevel(f.logLevel) // checked by config
	logger := newLogger(stderr, f.logFormat, level)
	slog.SetDefault(logger) // and so the standard log package's lines
	routeGRPCLogs(logger)
	cfg.Logger = logger
	for _, w := range warnings {
		logger.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg); err != nil {
		logger.Error("airlockd stopped", "err", err)
		return 1
	}
	return 0
}

// serve builds the node and runs it until ctx ends.
func serve(ctx context.Context, cfg node.Config) error {
	n, err := node.New(ctx, cfg)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}
