package airlock

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Preview URLs: a server listening on a port inside a session, reached
// from outside through the node (at /v1/sessions/{id}/ports/{port}/...
// or at the host {port}-{session_id}.{preview domain}). The node reaches
// the port over its own channel to the sandbox's agent, never over a
// network: see AgentPorts.

// AgentPorts is implemented by an Agent that can reach TCP ports on the
// sandbox's own loopback (agent/protocol's Client does).
type AgentPorts interface {
	// DialPort connects to port (1-65535) on the sandbox's loopback.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// PreviewTarget is a live session's side of a preview: who owns it and
// how to reach its ports.
type PreviewTarget struct {
	TenantID  string
	SessionID string
	// Dial connects to a port on the session's loopback.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// Ended is closed when the session is over (its previews are cut).
	Ended <-chan struct{}
}

// PreviewTargets finds the live sessions this node holds, for any
// tenant: the preview service checks who may reach them.
type PreviewTargets interface {
	// PreviewTarget returns the session, or ENOTFOUND when this node
	// holds no live sandbox for it or tenant (when not nil) does not own
	// it.
	PreviewTarget(ctx context.Context, tenant *Tenant, sessionID string) (*PreviewTarget, error)
}

// PreviewToken is a signed, expiring, revocable access token to one port
// of one session.
type PreviewToken struct {
	Token     string    `json:"token"`
	TokenID   string    `json:"token_id"`
	SessionID string    `json:"session_id"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
	// URL is the path-form preview URL with the token as its query.
	URL string `json:"url"`
	// HostURL is the host-form URL with the token, when the node has a
	// preview domain.
	HostURL string `json:"host_url,omitempty"`
}

// PreviewPort is how one port of a session is exposed.
type PreviewPort struct {
	SessionID string `json:"session_id"`
	Port      int    `json:"port"`
	// Public ports are served to anyone who has the URL; others need the
	// tenant's key or a token.
	Public bool `json:"public"`
	// Tokens are the tokens issued for the port and not revoked or
	// expired (their IDs and expiry; never the tokens themselves).
	Tokens []PreviewTokenInfo `json:"tokens"`
}

// PreviewTokenInfo describes an issued token without its secret.
type PreviewTokenInfo struct {
	TokenID   string    `json:"token_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PreviewService serves preview URLs and their access controls. Every
// method acts for tenant on its own sessions: another tenant's session
// is ENOTFOUND.
type PreviewService interface {
	// ServePreview proxies r to port of session sessionID, at path
	// (beginning with "/"). tenant is who the request's API key is, or
	// nil; the service admits a request by that tenant's key, a token
	// or a public port.
	ServePreview(w http.ResponseWriter, r *http.Request, tenant *Tenant, sessionID string, port int, path string)
	// CreatePreviewToken issues a token for the port, valid for ttl.
	CreatePreviewToken(ctx context.Context, tenant *Tenant, sessionID string, port int, ttl time.Duration) (*PreviewToken, error)
	// RevokePreviewTokens revokes the port's token tokenID, or all of
	// its tokens when tokenID is empty, and returns the port.
	RevokePreviewTokens(ctx context.Context, tenant *Tenant, sessionID string, port int, tokenID string) (*PreviewPort, error)
	// SetPreviewPort makes the port public or private again.
	SetPreviewPort(ctx context.Context, tenant *Tenant, sessionID string, port int, public bool) (*PreviewPort, error)
	// PreviewPort describes the port.
	PreviewPort(ctx context.Context, tenant *Tenant, sessionID string, port int) (*PreviewPort, error)
}

// Kind of the egress audit log's entries for preview requests: one per
// request (or WebSocket), with its method (Protocol), path (Name), port,
// Host, bytes each way, status (Detail) and duration.
const EgressPreview = "preview"
