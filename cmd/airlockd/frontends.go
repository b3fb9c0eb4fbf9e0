package main

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/console"
	"github.com/airlockhq/airlock/api/mcp"
)

// frontDoor is what airlockd serves: the REST API, and beside it the MCP
// server at /mcp, whose tool calls are requests to mcpAPI (that same API,
// routed by the fleet when there is one) made in-process with the
// caller's key, and the web console at /console/, a page that speaks
// that same API from the browser.
func frontDoor(api, mcpAPI http.Handler, store airlock.Store, logger *slog.Logger) (http.Handler, error) {
	mcpHandler, err := mcp.NewHandler(mcp.HandlerConfig{API: mcpAPI, Keys: store, Logger: logger, Version: "airlockd"})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.Handle(console.Prefix, console.Handler())
	mux.Handle(strings.TrimSuffix(console.Prefix, "/"), console.Handler())
	mux.Handle("/", api)
	return mux, nil
}
