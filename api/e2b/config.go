package e2b

import (
	"context"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
)

// Sessions is what the E2B front-end needs of the session service: the
// service of the native API, its network policy, and the file and stdin
// operations of package session that E2B's SDKs use.
type Sessions interface {
	airlock.SessionService
	airlock.SessionNetworkService
	StatFile(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileEntry, error)
	MakeDir(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileEntry, error)
	MoveFile(ctx context.Context, tenant *airlock.Tenant, id, src, dst string) (*airlock.FileEntry, error)
	RemoveAll(ctx context.Context, tenant *airlock.Tenant, id, path string) error
	WriteStdin(ctx context.Context, tenant *airlock.Tenant, id string, pid int, b []byte) error
	CloseStdin(ctx context.Context, tenant *airlock.Tenant, id string, pid int) error
}

// Tenants finds API keys by hash and ID, and tenants by ID: every
// request checks its key's state (revoked, expired) in the store.
type Tenants interface {
	APIKeyByHash(ctx context.Context, hash string) (*airlock.APIKey, error)
	APIKey(ctx context.Context, id string) (*airlock.APIKey, error)
	TenantByID(ctx context.Context, id string) (*airlock.Tenant, error)
}

// Defaults of Config.
const (
	// DefaultDomain is the domain sandboxes are given: .invalid never
	// resolves (RFC 6761), so an SDK without E2B_SANDBOX_URL fails on DNS
	// instead of sending commands and tokens to E2B's cloud.
	DefaultDomain = "airlock.invalid"
	// EnvdVersion is the envd version sandboxes advertise: the SDKs
	// enable what this version has (closeStdin, octet-stream uploads)
	// and refuse on the client side what it lacks (file metadata, newer
	// watch options).
	EnvdVersion    = "0.5.7"
	DefaultTimeout = 300 * time.Second // a sandbox's life when create names none
	MinSecretBytes = 32
)

// DefaultTemplates maps E2B template names to Airlock images.
var DefaultTemplates = map[string]string{
	"code-interpreter-v1": "python-ds",
	"code-interpreter":    "python-ds",
	"base":                "base",
}

// Config configures a Server.
type Config struct {
	Sessions Sessions // required
	// PTYs serves E2B's pty API; nil means Sessions if it serves
	// terminals too, else the pty API answers Unimplemented.
	PTYs    airlock.PTYService
	Store   airlock.E2BStore // required
	Tenants Tenants          // required
	// Secret derives every sandbox's access tokens (HMAC-SHA256); at
	// least MinSecretBytes, kept across restarts (sessions outlive them).
	Secret []byte
	// Templates maps E2B template names to images; DefaultTemplates if
	// nil.
	Templates map[string]string
	// UserTemplates resolves a templateID that Templates does not map:
	// the tenant's template of that name, else the operator's (Airlock
	// templates, POST /v1/templates). Nil: only Templates.
	UserTemplates airlock.TemplateResolver
	// Domain is the domain of every sandbox; DefaultDomain if empty.
	Domain string
	// Size is the session size of every sandbox (the session service's
	// default if empty).
	Size airlock.SessionSize
	// DefaultTimeout is a sandbox's life when create names none;
	// MaxLifetime the most any sandbox may live (the session service's
	// maximum lifetime): timeouts are clamped to it.
	DefaultTimeout time.Duration
	MaxLifetime    time.Duration
	// MaxProcessTimeout is the longest a process or a cell may run (the
	// session service's maximum exec timeout): a process with no
	// deadline of its own gets it.
	MaxProcessTimeout time.Duration
	// NetworkAllow returns a tenant's default allow list, which
	// allow_internet_access asks for; nil means none (no internet).
	NetworkAllow func(*airlock.Tenant) []string
	// ClientID is the clientID of every sandbox ("airlock" if empty).
	ClientID string
	// UploadMinRate is the least an upload to /files must send, in bytes
	// a second on average over every UploadRateWindow, or it is cut off
	// (400); 8 KiB/s and 30 s if zero.
	UploadMinRate    int64
	UploadRateWindow time.Duration
	Logger           *slog.Logger     // slog.Default() if nil
	Now              func() time.Time // time.Now if nil
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	switch {
	case c.Sessions == nil:
		return airlock.Errorf(airlock.EINVALID, "e2b: sessions are required")
	case c.Store == nil:
		return airlock.Errorf(airlock.EINVALID, "e2b: store is required")
	case c.Tenants == nil:
		return airlock.Errorf(airlock.EINVALID, "e2b: tenants are required")
	case len(c.Secret) < MinSecretBytes:
		return airlock.Errorf(airlock.EINVALID, "e2b: secret must be at least %d bytes", MinSecretBytes)
	case c.MaxLifetime < time.Second:
		return airlock.Errorf(airlock.EINVALID, "e2b: max lifetime must be at least 1s")
	case c.MaxProcessTimeout < time.Second:
		return airlock.Errorf(airlock.EINVALID, "e2b: max process timeout must be at least 1s")
	case c.DefaultTimeout < 0:
		return airlock.Errorf(airlock.EINVALID, "e2b: default timeout must not be negative")
	case c.Size != "" && !c.Size.Valid():
		return airlock.Errorf(airlock.EINVALID, "e2b: unknown session size %q", c.Size)
	}
	for name, img := range c.Templates {
		if name == "" || img == "" {
			return airlock.Errorf(airlock.EINVALID, "e2b: template %q maps to image %q", name, img)
		}
	}
	return nil
}
