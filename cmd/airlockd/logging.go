package main

import (
	"io"
	"log/slog"
	"strings"

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
