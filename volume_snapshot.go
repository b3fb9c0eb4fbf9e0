package airlock

import (
	"context"
	"regexp"
	"time"
)

// Volume snapshots: a volume's files at one moment, sealed like a
// workspace snapshot (the tenant's data key, package seal's stream
// format) and kept in the blob store; a new volume can be made from one
// (CreateVolumeRequest.FromSnapshot).

// VolumeSnapshot is one sealed copy of a volume's files. It outlives the
// volume it was taken of.
type VolumeSnapshot struct {
	ID       string `json:"snapshot_id"`
	TenantID string `json:"tenant_id"`
	Volume   string `json:"volume"` // the volume it was taken of
	Name     string `json:"name,omitempty"`
	// SizeMiB is the size of the volume when it was taken: a volume made
	// from the snapshot without a size of its own gets it.
	SizeMiB int64 `json:"size_mib"`
	// Bytes and SHA256 describe the sealed blob as stored; Entries is how
	// many files, directories and symlinks the volume held.
	Bytes     int64     `json:"size_bytes"`
	SHA256    string    `json:"sha256"`
	Entries   int64     `json:"entries"`
	Node      string    `json:"node,omitempty"` // the node that took it (fleet)
	KeyID     string    `json:"-"`              // the tenant data key that sealed it
	BlobKey   string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// VolumeSnapshotBlobKey is where a volume snapshot's sealed bytes live in
// Blobs.
func VolumeSnapshotBlobKey(tenantID, id string) string {
	return "volume-snapshots/" + tenantID + "/" + id
}

// CreateVolumeSnapshotRequest is the body of POST
// /v1/volumes/{name}/snapshots (which may be empty).
type CreateVolumeSnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// Validate checks a volume snapshot request: the name as a workspace
// snapshot's.
func (r *CreateVolumeSnapshotRequest) Validate() error {
	c := CreateSnapshotRequest{Name: r.Name}
	return c.Validate()
}

// VolumeSnapshotList is the body of GET /v1/volumes/{name}/snapshots.
type VolumeSnapshotList struct {
	Snapshots []*VolumeSnapshot `json:"snapshots"`
}

var volumeSnapshotID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidVolumeSnapshotID reports whether s can be a volume snapshot's ID.
func ValidVolumeSnapshotID(s string) bool { return volumeSnapshotID.MatchString(s) }

// VolumeSnapshotStore keeps the records of volume snapshots, scoped to
// a tenant. Their sealed bytes count with the workspace snapshots'
// (KeepStore.SnapshotBytes) against the tenant's snapshot quota.
type VolumeSnapshotStore interface {
	CreateVolumeSnapshot(ctx context.Context, s *VolumeSnapshot) error
	// VolumeSnapshot returns the tenant's volume snapshot; ENOTFOUND
	// (volume-snapshot-not-found) for a missing one and for another
	// tenant's.
	VolumeSnapshot(ctx context.Context, tenantID, id string) (*VolumeSnapshot, error)
	// ListVolumeSnapshots returns the snapshots of the tenant's volume
	// of that name, newest first.
	ListVolumeSnapshots(ctx context.Context, tenantID, volume string) ([]*VolumeSnapshot, error)
	DeleteVolumeSnapshot(ctx context.Context, tenantID, id string) error
}
