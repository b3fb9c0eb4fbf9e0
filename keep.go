package airlock

import (
	"context"
	"io"
	"time"
)

// Keep work: encrypted workspace snapshots, pause and resume, fork.

// Snapshot kinds.
const (
	// SnapshotWorkspace holds the workspace's files, directories, modes
	// and symlinks: a session made from it boots fresh with that
	// workspace.
	SnapshotWorkspace = "workspace"
	// SnapshotMemory holds the whole sandbox: its processes and memory
	// (a checkpoint) and its disk. A session made from it goes on from
	// that state, reseeded like a fork; it restores only on a node with
	// the same backend and runtime version, for the same image and size,
	// and without a network.
	SnapshotMemory = "memory"
)

// Snapshot is a tenant's saved workspace, stored sealed (encrypted under
// the tenant's data key) in the blob store.
type Snapshot struct {
	ID        string      `json:"snapshot_id"`
	TenantID  string      `json:"tenant_id"`
	SessionID string      `json:"session_id"` // the session it was taken of
	Name      string      `json:"name,omitempty"`
	Kind      string      `json:"kind"`
	Image     string      `json:"image"` // of the session it was taken of
	Size      SessionSize `json:"size"`
	// Bytes and SHA256 describe the sealed blob as stored; Entries is
	// how many files, directories and symlinks the workspace held.
	Bytes     int64     `json:"size_bytes"`
	SHA256    string    `json:"sha256"`
	Entries   int64     `json:"entries"`
	KeyID     string    `json:"-"` // the tenant data key that sealed it
	Runtime   string    `json:"-"` // memory snapshots: backend and snapshot version
	BlobKey   string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// SnapshotBlobKey is where a snapshot's sealed bytes live in Blobs.
func SnapshotBlobKey(tenantID, id string) string { return "snapshots/" + tenantID + "/" + id }

// CreateSnapshotRequest is the body of POST /v1/sessions/{id}/snapshots.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
	// IncludeMemory saves the process state as well (SnapshotMemory),
	// with the cloning risks of base snapshots: restores are reseeded.
	IncludeMemory bool `json:"include_memory,omitempty"`
}

// Validate checks a snapshot request.
func (r *CreateSnapshotRequest) Validate() error {
	if len(r.Name) > 128 {
		return Problem(EINVALID, "invalid-snapshot-name", "name is at most 128 bytes")
	}
	for _, c := range r.Name {
		if c < 0x20 || c == 0x7f {
			return Problem(EINVALID, "invalid-snapshot-name", "name must not contain control characters")
		}
	}
	return nil
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	Count int `json:"count"`
	// IncludeMemory forks the processes too (code contexts with their
	// variables), each fork reseeded; without it each fork gets a copy of
	// the workspace in a fresh sandbox.
	IncludeMemory bool `json:"include_memory,omitempty"`
}

// MaxForks bounds ForkRequest.Count.
const MaxForks = 16

// Validate checks a fork request.
func (r *ForkRequest) Validate() error {
	if r.Count == 0 {
		r.Count = 1
	}
	if r.Count < 1 || r.Count > MaxForks {
		return Problem(EINVALID, "invalid-fork-count", "count must be between 1 and %d", MaxForks)
	}
	return nil
}

// ForkResult is the answer of POST /v1/sessions/{id}/fork.
type ForkResult struct {
	Sessions []*Session `json:"sessions"`
}

// SnapshotPage is one page of a tenant's snapshots, newest first.
type SnapshotPage struct {
	Snapshots  []*Snapshot `json:"snapshots"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// SessionPause records where a paused session's sandbox was saved.
type SessionPause struct {
	SessionID string
	TenantID  string
	Dir       string // the checkpoint, on this node
	Backend   string
	PausedAt  time.Time
	Bytes     int64 // what the saved sandbox holds on disk
}

// KeepStore keeps snapshot records and the pauses of sessions. Queries
// are scoped to a tenant except those the node uses for its own work.
type KeepStore interface {
	CreateSnapshot(ctx context.Context, s *Snapshot) error
	// Snapshot returns the tenant's snapshot; ErrNotFound for a missing
	// one and for another tenant's.
	Snapshot(ctx context.Context, tenantID, id string) (*Snapshot, error)
	// ListSnapshots returns up to limit of the tenant's snapshots, newest
	// first, after the snapshot before ("" for the first page).
	ListSnapshots(ctx context.Context, tenantID, before string, limit int) ([]*Snapshot, error)
	DeleteSnapshot(ctx context.Context, tenantID, id string) error
	// SnapshotBytes is the sealed size of all of the tenant's snapshots.
	SnapshotBytes(ctx context.Context, tenantID string) (int64, error)

	// PutPause records (or replaces) the pause of a session.
	PutPause(ctx context.Context, p *SessionPause) error
	// Pause returns the tenant's session's pause; ErrNotFound if none.
	Pause(ctx context.Context, tenantID, sessionID string) (*SessionPause, error)
	DeletePause(ctx context.Context, sessionID string) error
	// Pauses returns every pause on record, oldest first.
	Pauses(ctx context.Context) ([]*SessionPause, error)
}

// KeepService is what the API offers for snapshots, pause and resume,
// and fork.
type KeepService interface {
	CreateSnapshot(ctx context.Context, tenant *Tenant, sessionID string, req CreateSnapshotRequest) (*Snapshot, error)
	Snapshot(ctx context.Context, tenant *Tenant, id string) (*Snapshot, error)
	ListSnapshots(ctx context.Context, tenant *Tenant, before string, limit int) (*SnapshotPage, error)
	DeleteSnapshot(ctx context.Context, tenant *Tenant, id string) error
	PauseSession(ctx context.Context, tenant *Tenant, id string) (*Session, error)
	ResumeSession(ctx context.Context, tenant *Tenant, id string) (*Session, error)
	ForkSession(ctx context.Context, tenant *Tenant, id string, req ForkRequest) (*ForkResult, error)
	// TemplateFromSession makes a template, private to the tenant, of the
	// session's filesystem (and with IncludeMemory its memory); the
	// template is returned building and the session goes on.
	TemplateFromSession(ctx context.Context, tenant *Tenant, id string, req SessionTemplateRequest) (*Template, error)
}

// Pauser is implemented by backends that can pause: a running sandbox is saved to a directory on this node (its memory and
// its disk) and ended, and restored from it later, as often as asked.
type Pauser interface {
	// Pause saves sb into dir (which must not exist) and ends sb.
	Pause(ctx context.Context, sb Sandbox, dir string) error
	// Resume starts a sandbox from a directory Pause made, with spec's ID
	// (a new one) and the paused sandbox's image and limits. dir is left
	// as it was: the caller removes it once the resumed sandbox serves.
	Resume(ctx context.Context, spec SandboxSpec, dir string) (Sandbox, error)
}

// PauseCopier is implemented by Pausers that can copy a paused sandbox,
// so that several sandboxes resume from one state (fork).
type PauseCopier interface {
	CopyPaused(ctx context.Context, src, dst string) error
}

// PauseArchiver is implemented by Pausers that can write a paused
// sandbox as one stream and make a paused sandbox from such a stream
// (memory snapshots).
type PauseArchiver interface {
	WritePaused(ctx context.Context, dir string, w io.Writer) error
	// ReadPaused makes dir (which must not exist) from a stream
	// WritePaused wrote; anything else is an error.
	ReadPaused(ctx context.Context, r io.Reader, dir string) error
}
