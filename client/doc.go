// Package client is the Go client of the Airlock HTTP API: it runs code
// (POST /v1/execute), reads the execution history, downloads artifacts,
// checks a server's health, and drives sessions: create (idempotently),
// exec (streamed as server-sent events), files (streamed both ways) and
// code contexts.
//
// It owns only the wire side: building requests, bounding and decoding
// responses, and turning RFC 9457 problem documents into *Error values that
// unwrap to an *airlock.Error, so airlock.ErrorCode works on them. The
// domain types come from package airlock; the client must not import the
// server's packages (httpapi, sqlite, the manager) and must never send the
// API key to a host other than the one in Config.BaseURL.
package client
