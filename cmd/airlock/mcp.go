package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/api/mcp"
)

const mcpUsage = `usage: airlock mcp [--url URL] [--key KEY] [--verbose]

Serves Airlock's tools (run_code, create_session, exec, run_cell,
write_file, read_file, list_files, delete_session) to an MCP client over
this process's stdin and stdout, for agents that spawn their tools. Every
call goes to the server at --url with the API key, as the REST API.

Example, in an MCP client's configuration:
  {"mcpServers": {"airlock": {"command": "airlock", "args": ["mcp"],
    "env": {"AIRLOCK_URL": "http://127.0.0.1:8080", "AIRLOCK_API_KEY": "..."}}}}

flags:
  --url URL     server URL (default $AIRLOCK_URL, else http://127.0.0.1:8080)
  --key KEY     API key (default $AIRLOCK_API_KEY, else <state-dir>/default.key)
  --verbose     log every tool call on stderr
`

func runMCP(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("mcp", mcpUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	verbose := fs.Bool("verbose", false, "log every tool call")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageError(std.err, "mcp", "unexpected argument %q", pos[0])
	}
	c, err := srv.client(nil)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: level}))
	s, err := mcp.NewServer(mcp.Config{
		Client:  func(context.Context, *sdk.CallToolRequest) (mcp.API, error) { return c, nil },
		Logger:  logger,
		Version: "cli",
	})
	if err != nil {
		return err
	}
	err = s.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(std.in), Writer: nopWriteCloser{std.out}})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil // the client closed stdin, or a signal
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
