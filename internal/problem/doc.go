// Package problem is Airlock's one mapping between errors and HTTP: the
// table from error code to HTTP status (and back), the RFC 9457 problem
// document, its one writer, and the reading of a problem response back
// into an *airlock.Error. The REST API, the MCP endpoint and the fleet
// write problems with it; the Go client reads them with it.
//
// It knows the domain's error type and net/http, nothing else: no
// server, no routes, no logging (callers log internal errors, which this
// package never puts in a problem).
package problem
