// Package mcp is Airlock's Model Context Protocol server: the tools an
// agent calls to run code (run_code, create_session, exec, run_cell,
// write_file, read_file, list_files, delete_session), built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk). airlockd
// serves it over streamable HTTP at /mcp (Handler), behind the same
// bearer keys as the REST API; `airlock mcp` serves it over stdio
// (NewServer with one client) for desktop agents that spawn their tools.
//
// It owns:
//   - the tools: their names, their input and output schemas (derived from
//     the domain types the REST API takes and returns, with descriptions
//     an LLM can act on), their results (a short text, the domain object
//     as structured content, PNG and other images as image content) and
//     their errors (every problem the API answers is a tool error that
//     names the problem type, its status and when to retry, never a
//     protocol error);
//   - /mcp: bearer authentication (401 problem documents), body limits,
//     and an in-process transport (Loopback) that hands every tool call
//     to the REST API's own handler with the caller's key.
//
// Every tool call is a call of the REST API through the Go client
// (package client): the same authentication, quotas, isolation floor,
// egress policy, problems and execution records, with no second path to
// sandboxes. It must not touch the session service, the executor, the
// store's records or the blobs directly.
package mcp
