package main

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"google.golang.org/grpc/grpclog"

	"github.com/airlockhq/airlock/internal/tracing"
)

// parseLevel reads --log-level.
func parseLevel(s string) (slog.Level, error) {
	var level slog.Level
	err := level.UnmarshalText([]byte(strings.TrimSpace(s)))
	return level, err
}

// newLogger is airlockd's logger: --log-format text (logfmt-like
// key=value) or json (one object a line), at --log-level. Records logged
// with a request's context carry its trace_id and span_id. Made the
// default, it also carries what packages write with the standard log
// package.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(tracing.LogHandler(h))
}

// routeGRPCLogs sends what gRPC (under the etcd client) logs at warning
// and error to logger, so that with --log-format json every line of
// airlockd's log is JSON; gRPC's informational chatter is dropped.
func routeGRPCLogs(logger *slog.Logger) {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard,
		slogWriter{logger, slog.LevelWarn}, slogWriter{logger, slog.LevelError}))
}

// slogWriter logs each write as one record of its level.
type slogWriter struct {
	logger *slog.Logger
	level  slog.Level
}

func (w slogWriter) Write(p []byte) (int, error) {
	w.logger.Log(context.Background(), w.level, "grpc", "line", strings.TrimSpace(string(p)))
	return len(p), nil
}
