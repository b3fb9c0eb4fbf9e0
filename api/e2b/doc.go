// Package e2b serves the E2B API, so that the official E2B SDKs (npm
// e2b and @e2b/code-interpreter, PyPI e2b and e2b-code-interpreter) run
// unchanged against a self-hosted airlockd: with E2B_API_URL and
// E2B_SANDBOX_URL both set to airlockd's address, every SDK call comes
// here.
//
// It is a front-end, like the HTTP API of package httpapi: an E2B
// sandbox is an Airlock session, made, used and ended through the same
// session service (Config.Sessions), so the tenant's quotas, isolation
// floor, egress policy and execution records are those of the native
// API by construction. It owns:
//
//   - routing: the control plane (/sandboxes..., /v2/sandboxes...) by
//     path, the in-sandbox services by the E2b-Sandbox-Id and
//     E2b-Sandbox-Port headers the SDKs send (Server.Wrap puts them in
//     front of the native API on one listener);
//   - the control plane's JSON ({code, message} errors, X-API-KEY
//     authentication with the tenants' API keys);
//   - per-sandbox access tokens (envdAccessToken, trafficAccessToken),
//     derived from a server secret and the sandbox ID, required and
//     compared in constant time on every in-sandbox call;
//   - the envd services over the Connect protocol (process and
//     filesystem: generated code in internal/envdpb from our own
//     descriptions of the wire in proto/, made by
//     scripts/gen-e2b-proto.sh), the /files and /health endpoints;
//   - the code interpreter's /execute (NDJSON) and /contexts, on the
//     session's code contexts;
//   - the output of the processes it started, fanned out to their Start
//     and Connect streams.
//
// It does not make, run or destroy sandboxes itself, and it never
// reaches the agent: everything goes through the session service.
//
// Attribution: the service, message and field names and numbers of
// proto/process/process.proto and proto/filesystem/filesystem.proto
// follow E2B's public envd protocol definitions (the repository
// e2b-dev/infra, packages/envd/spec, under the Apache License 2.0).
// Ours were written from the wire study of the published SDKs and from
// those public definitions, and checked against e2b-dev/infra commit
// 54693ff353d26c5fe1951db5467e751f3e2f984e (the descriptors protoc
// builds from both are the same apart from go_package).
//
// The wire was checked against the JavaScript SDKs e2b 2.51.0 and
// @e2b/code-interpreter 2.8.0 (e2e/e2bsdk runs them in CI); the Python
// SDKs (e2b-code-interpreter 2.9 or newer) speak the same wire but are
// not run here.
package e2b
