// Package preview serves preview URLs: a server listening on a port
// inside a live session, reached from outside at
// /v1/sessions/{id}/ports/{port}/... or at the host
// {port}-{session_id}.{preview domain}.
//
// It owns who may reach a port (the tenant's key, a signed token it
// issued, or a port made public), the per-session limits on connections
// and bytes, and one audit entry per request in the session's egress
// log. It reaches the port only through the session's agent channel
// (airlock.PreviewTargets, airlock.AgentPorts): the agent connects to
// the sandbox's own loopback, so no other address on the host or in
// another sandbox can be named through a preview.
//
// It must not reach a sandbox by any network path, and it knows nothing
// of the REST routes beyond the requests handed to it.
package preview
