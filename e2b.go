package airlock

import (
	"context"
	"time"
)

// E2BSandbox is what the E2B-compatible API (package e2b) keeps about a
// session it made or opened, beyond the session itself: E2B's template
// name, metadata and environment, and the default code contexts of its
// code interpreter. Its ID is the session's.
type E2BSandbox struct {
	SandboxID  string
	TenantID   string
	TemplateID string
	Metadata   map[string]string
	EnvVars    map[string]string
	// Contexts are the default code contexts made so far, by language
	// (python, javascript): their Airlock context IDs.
	Contexts  map[string]string
	CreatedAt time.Time
}

// E2BStore keeps E2BSandbox records.
type E2BStore interface {
	// PutE2BSandbox records s, replacing a record of the same sandbox.
	// The session must exist and be the tenant's.
	PutE2BSandbox(ctx context.Context, s *E2BSandbox) error
	// E2BSandbox returns the record of a sandbox of any tenant (the
	// caller checks whose it is); ENOTFOUND if there is none.
	E2BSandbox(ctx context.Context, sandboxID string) (*E2BSandbox, error)
}
