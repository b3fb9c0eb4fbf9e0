package rest

import "net/http"

// authMode says how a route authenticates.
type authMode int

const (
	authNone     authMode = iota // public
	authBearer                   // a valid bearer key is required
	authOptional                 // a bearer key, if sent, must be valid; the handler decides
	authAdmin                    // a valid operator (admin) key is required
)

// route is one operation of the API.
type route struct {
	method  string
	pattern string // a net/http pattern path; also the OpenAPI path
	handle  func(*Server, http.ResponseWriter, *http.Request)
	auth    authMode
}

// routes is the one list of operations: New registers exactly these, and a
// test checks openapi.json documents exactly these.
var routes = []route{
	{http.MethodGet, "/healthz", (*Server).healthz, authNone},
	{http.MethodGet, "/readyz", (*Server).readyz, authNone},
	{http.MethodGet, "/openapi.json", (*Server).openapi, authNone},
	{http.MethodGet, "/metrics", (*Server).metrics, authNone},
	// The problem catalogue, which problem type URIs resolve to.
	{http.MethodGet, "/problems", (*Server).problemCatalogue, authNone},
	{http.MethodGet, "/problems/{slug}", (*Server).problemEntry, authNone},
	{http.MethodPost, "/v1/execute", (*Server).execute, authBearer},
	// The reference blueprint's route: its request shape, our response.
	{http.MethodPost, "/v1/sandbox/execute", (*Server).sandboxExecute, authBearer},
	{http.MethodGet, "/v1/executions", (*Server).listExecutions, authBearer},
	{http.MethodGet, "/v1/executions/{id}", (*Server).getExecution, authBearer},
	{http.MethodGet, "/v1/executions/{id}/egress", (*Server).executionEgress, authBearer},
	{http.MethodGet, "/v1/events", (*Server).listEvents, authBearer},
	// Signed URL (token query) or the owner's bearer key.
	{http.MethodGet, "/v1/artifacts/{id}", (*Server).getArtifact, authOptional},
	{http.MethodGet, "/v1/usage", (*Server).usage, authBearer},

	// The tenant's own keys (keys.go).
	{http.MethodGet, "/v1/keys", (*Server).listKeys, authBearer},
	{http.MethodPost, "/v1/keys", (*Server).createKey, authBearer},
	{http.MethodDelete, "/v1/keys/{key_id}", (*Server).revokeKey, authBearer},

	// The admin API: operator keys only (admin.go, audit.go).
	{http.MethodPost, "/v1/admin/tenants", (*Server).adminCreateTenant, authAdmin},
	{http.MethodGet, "/v1/admin/tenants", (*Server).adminListTenants, authAdmin},
	{http.MethodGet, "/v1/admin/tenants/{name}", (*Server).adminGetTenant, authAdmin},
	{http.MethodPatch, "/v1/admin/tenants/{name}", (*Server).adminPatchTenant, authAdmin},
	{http.MethodDelete, "/v1/admin/tenants/{name}", (*Server).adminDeleteTenant, authAdmin},
	{http.MethodPost, "/v1/admin/tenants/{name}/keys", (*Server).adminCreateKey, authAdmin},
	{http.MethodGet, "/v1/admin/tenants/{name}/keys", (*Server).adminListKeys, authAdmin},
	{http.MethodPost, "/v1/admin/keys", (*Server).adminCreateOperatorKey, authAdmin},
	{http.MethodGet, "/v1/admin/keys", (*Server).adminListOperatorKeys, authAdmin},
	{http.MethodDelete, "/v1/admin/keys/{key_id}", (*Server).adminRevokeKey, authAdmin},
	{http.MethodGet, "/v1/admin/usage", (*Server).adminUsage, authAdmin},
	{http.MethodGet, "/v1/admin/events", (*Server).adminEvents, authAdmin},
	{http.MethodGet, "/v1/admin/audit", (*Server).listAudit, authAdmin},
	{http.MethodPost, "/v1/admin/templates", (*Server).adminCreateTemplate, authAdmin},
	{http.MethodGet, "/v1/admin/templates", (*Server).adminListTemplates, authAdmin},
	{http.MethodDelete, "/v1/admin/templates/{name}", (*Server).adminDeleteTemplate, authAdmin},

	// Sessions (sessions.go, session_exec.go, session_files.go, contexts.go).
	{http.MethodPost, "/v1/sessions", (*Server).createSession, authBearer},
	{http.MethodGet, "/v1/sessions", (*Server).listSessions, authBearer},
	{http.MethodGet, "/v1/sessions/{id}", (*Server).getSession, authBearer},
	{http.MethodDelete, "/v1/sessions/{id}", (*Server).deleteSession, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/timeout", (*Server).extendSession, authBearer},
	{http.MethodPut, "/v1/sessions/{id}/network", (*Server).setSessionNetwork, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/egress", (*Server).sessionEgress, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/metrics", (*Server).sessionMetrics, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/output", (*Server).sessionOutput, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/exec", (*Server).sessionExec, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/exec/{pid}/signal", (*Server).signalExec, authBearer},
	{http.MethodPut, "/v1/sessions/{id}/files", (*Server).putFile, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/files", (*Server).getFile, authBearer},
	{http.MethodDelete, "/v1/sessions/{id}/files", (*Server).deleteFile, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/contexts", (*Server).createContext, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/contexts", (*Server).listContexts, authBearer},
	{http.MethodDelete, "/v1/sessions/{id}/contexts/{cid}", (*Server).deleteContext, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/contexts/{cid}/restart", (*Server).restartContext, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/contexts/{cid}/run", (*Server).runCell, authBearer},
	// Snapshots, pause and resume, fork (keep.go).
	{http.MethodPost, "/v1/sessions/{id}/snapshots", (*Server).createSnapshot, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/pause", (*Server).pauseSession, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/resume", (*Server).resumeSession, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/fork", (*Server).forkSession, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/template", (*Server).sessionTemplate, authBearer},
	// Preview URLs (preview.go): the tenant's key, a preview token or a
	// public port opens a port; the service decides.
	{http.MethodGet, "/v1/sessions/{id}/ports/{port}", (*Server).getPreviewPort, authBearer},
	{http.MethodPut, "/v1/sessions/{id}/ports/{port}", (*Server).setPreviewPort, authBearer},
	{http.MethodPost, "/v1/sessions/{id}/ports/{port}/token", (*Server).createPreviewToken, authBearer},
	{http.MethodDelete, "/v1/sessions/{id}/ports/{port}/token", (*Server).revokePreviewTokens, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodPost, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodPut, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodPatch, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodDelete, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodOptions, "/v1/sessions/{id}/ports/{port}/{path...}", (*Server).servePreview, authOptional},
	{http.MethodGet, "/v1/snapshots", (*Server).listSnapshots, authBearer},
	{http.MethodGet, "/v1/snapshots/{id}", (*Server).getSnapshot, authBearer},
	// Terminals (pty.go).
	{http.MethodPost, "/v1/sessions/{id}/pty", (*Server).createPTY, authBearer},
	{http.MethodGet, "/v1/sessions/{id}/pty/{pty_id}", (*Server).attachPTY, authBearer},
	{http.MethodDelete, "/v1/sessions/{id}/pty/{pty_id}", (*Server).deletePTY, authBearer},
	{http.MethodDelete, "/v1/snapshots/{id}", (*Server).deleteSnapshot, authBearer},

	// Webhooks (webhooks.go).
	{http.MethodPost, "/v1/webhooks", (*Server).createWebhook, authBearer},
	{http.MethodGet, "/v1/webhooks", (*Server).listWebhooks, authBearer},
	{http.MethodDelete, "/v1/webhooks/{id}", (*Server).deleteWebhook, authBearer},
	{http.MethodGet, "/v1/webhooks/{id}/deliveries", (*Server).listDeliveries, authBearer},
	{http.MethodPost, "/v1/webhooks/{id}/deliveries/{delivery_id}/replay", (*Server).replayDelivery, authBearer},
	// Templates (templates.go).
	{http.MethodPost, "/v1/templates", (*Server).createTemplate, authBearer},
	{http.MethodGet, "/v1/templates", (*Server).listTemplates, authBearer},
	{http.MethodPost, "/v1/templates/contexts", (*Server).uploadTemplateContext, authBearer},
	{http.MethodGet, "/v1/templates/{name}", (*Server).getTemplate, authBearer},
	{http.MethodDelete, "/v1/templates/{name}", (*Server).deleteTemplate, authBearer},
	{http.MethodGet, "/v1/templates/{name}/logs", (*Server).templateLogs, authBearer},
	// Volumes (volumes.go).
	{http.MethodPost, "/v1/volumes", (*Server).createVolume, authBearer},
	{http.MethodGet, "/v1/volumes", (*Server).listVolumes, authBearer},
	{http.MethodGet, "/v1/volumes/{name}", (*Server).getVolume, authBearer},
	{http.MethodDelete, "/v1/volumes/{name}", (*Server).deleteVolume, authBearer},
	{http.MethodPost, "/v1/volumes/{name}/snapshots", (*Server).createVolumeSnapshot, authBearer},
	{http.MethodGet, "/v1/volumes/{name}/snapshots", (*Server).listVolumeSnapshots, authBearer},
	{http.MethodDelete, "/v1/volumes/{name}/snapshots/{snapshot_id}", (*Server).deleteVolumeSnapshot, authBearer},
}
