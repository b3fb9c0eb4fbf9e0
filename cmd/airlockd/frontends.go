package main

import (
	"log/slog"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/mcp"
)

// frontDoor is what airlockd serves: the REST API, and beside it the MCP
// server at /mcp, whose tool calls are requests to that same API made
// in-process with the caller's key.
func frontDoor(api http.Handler, store airlock.Store, logger *slog.Logger) (http.Handler, error) {
	mcpHandler, err := mcp.NewHandler(mcp.HandlerConfig{API: api, Keys: store, Logger: logger, Version: "airlockd"})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.Handle("/", api)
	return mux, nil
}
