package airlock

import (
	"context"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

// Volumes: named, size-capped disks of a tenant that outlive sessions.

// Volume is a tenant's named disk. Its bytes live on the node that holds
// it (Node), in a sparse ext4 image of SizeMiB; sessions mount it at a
// path of their choosing.
type Volume struct {
	Name     string `json:"name"`
	TenantID string `json:"tenant_id"`
	SizeMiB  int64  `json:"size_mib"`
	// Node is the fleet node that holds the volume's image ("" on a
	// single node): sessions mounting it run there.
	Node      string    `json:"node,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Mounts are the live sessions that have it mounted now.
	Mounts []VolumeMountInfo `json:"mounts"`
}

// VolumeMountInfo says which session has a volume mounted, where, and
// how.
type VolumeMountInfo struct {
	SessionID string    `json:"session_id"`
	Path      string    `json:"path"`
	ReadOnly  bool      `json:"read_only"`
	MountedAt time.Time `json:"mounted_at"`
}

// VolumeMount asks for a volume in a session (CreateSessionRequest.Volumes).
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only"`
}

// CreateVolumeRequest is the body of POST /v1/volumes.
type CreateVolumeRequest struct {
	Name    string `json:"name"`
	SizeMiB int64  `json:"size_mib"`
	// FromSnapshot makes the volume from one of the tenant's volume
	// snapshots (volume_snapshot.go): its files are written into the new
	// volume before it is answered. SizeMiB may then be 0 for the size of
	// the volume the snapshot was taken of.
	FromSnapshot string `json:"from_snapshot,omitempty"`
}

// Volume size bounds.
const (
	MinVolumeMiB = 16
	MaxVolumeMiB = 1 << 20 // 1 TiB
	// MaxSessionVolumes is how many volumes one session may mount.
	MaxSessionVolumes = 8
)

var volumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidVolumeName reports whether s can name a volume: 1 to 63 of a-z,
// 0-9, '-' and '_', starting with a letter or digit.
func ValidVolumeName(s string) bool { return volumeName.MatchString(s) }

func invalidVolumeName(s string) error {
	return Problem(EINVALID, "invalid-volume-name", "volume name %q is not 1 to 63 of a-z, 0-9, '-' and '_' starting with a letter or digit", clip(s, 80))
}

// Validate checks a create request.
func (r *CreateVolumeRequest) Validate() error {
	if !ValidVolumeName(r.Name) {
		return invalidVolumeName(r.Name)
	}
	if r.FromSnapshot != "" && !ValidVolumeSnapshotID(r.FromSnapshot) {
		return Problem(EINVALID, "invalid-volume-snapshot", "from_snapshot %q is not a volume snapshot ID", clip(r.FromSnapshot, 80))
	}
	if r.FromSnapshot != "" && r.SizeMiB == 0 {
		return nil // the snapshot's size, checked when it is read
	}
	if r.SizeMiB < MinVolumeMiB || r.SizeMiB > MaxVolumeMiB {
		return Problem(EINVALID, "invalid-volume-size", "size_mib must be %d to %d", MinVolumeMiB, MaxVolumeMiB)
	}
	return nil
}

// reservedVolumePaths are the sandbox paths a volume may neither cover
// nor sit under: the kernel's file systems and the agent's own.
var reservedVolumePaths = []string{"/proc", "/sys", "/dev", "/run/airlock", "/opt/airlock", "/airlock"}

// ValidateVolumePath checks a mount path: absolute, clean (no "..", no
// "//", no trailing '/'), at most 255 bytes, not / nor /workspace nor
// /tmp themselves (the session's own disks), not over or under /proc,
// /sys, /dev, and the agent's paths.
func ValidateVolumePath(p string) error {
	bad := func(why string) error {
		return Problem(EINVALID, "invalid-volume-path", "volume path %q: %s", clip(p, 80), why)
	}
	if p == "" || p[0] != '/' {
		return bad("must be absolute")
	}
	if len(p) > 255 {
		return bad("is longer than 255 bytes")
	}
	for _, c := range p {
		if c < 0x21 || c == 0x7f || c == '\\' {
			return bad("holds a space, a control character or a backslash")
		}
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == ".." || part == "." {
			return bad("must not hold . or .. components")
		}
	}
	if path.Clean(p) != p {
		return bad("must be a clean path (no // and no trailing /)")
	}
	switch p {
	case "/", "/workspace", "/tmp":
		return bad("must not cover the root, the workspace or /tmp itself (a path below them is fine)")
	}
	for _, r := range reservedVolumePaths {
		if p == r || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/") {
			return bad("must not be over or under " + r)
		}
	}
	return nil
}

// validateVolumes checks the volumes of a session request: names and
// paths valid, no volume twice, no path on or under another.
func validateVolumes(vs []VolumeMount) error {
	if len(vs) > MaxSessionVolumes {
		return Problem(EINVALID, "invalid-volume-path", "at most %d volumes per session", MaxSessionVolumes)
	}
	for i, v := range vs {
		if !ValidVolumeName(v.Name) {
			return invalidVolumeName(v.Name)
		}
		if err := ValidateVolumePath(v.Path); err != nil {
			return err
		}
		for _, w := range vs[:i] {
			if w.Name == v.Name {
				return Problem(EINVALID, "invalid-volume-path", "volume %s is named twice", v.Name)
			}
			if w.Path == v.Path || strings.HasPrefix(v.Path, w.Path+"/") || strings.HasPrefix(w.Path, v.Path+"/") {
				return Problem(EINVALID, "invalid-volume-path", "volume paths %s and %s overlap", w.Path, v.Path)
			}
		}
	}
	return nil
}

// SandboxVolume is a volume mounted on the host at HostDir, for a
// backend to bind into a sandbox at Path.
type SandboxVolume struct {
	HostDir  string
	Path     string
	ReadOnly bool
}

// VolumeClaim is one session's hold on a volume: at most one claim that
// is not ReadOnly (the writer) exists per volume.
type VolumeClaim struct {
	TenantID  string
	Volume    string
	SessionID string
	Path      string
	ReadOnly  bool
	Node      string
	MountedAt time.Time
}

// VolumeStore keeps volume records and their claims. Every query but
// the node's own (AllVolumeClaims) is scoped to a tenant.
type VolumeStore interface {
	// CreateVolume records a volume if the tenant's volumes then hold at
	// most maxTotalMiB (-1: no limit); ECONFLICT if the name is taken,
	// ERATELIMITED (volume-quota) if over.
	CreateVolume(ctx context.Context, v *Volume, maxTotalMiB int64) error
	// Volume returns the tenant's volume with its mounts; ENOTFOUND for a
	// missing one and for another tenant's.
	Volume(ctx context.Context, tenantID, name string) (*Volume, error)
	ListVolumes(ctx context.Context, tenantID string) ([]*Volume, error)
	// DeleteVolume drops a volume that no session has mounted; ECONFLICT
	// (volume-in-use) if one has.
	DeleteVolume(ctx context.Context, tenantID, name string) error
	// VolumeMiB is the sum of the sizes of the tenant's volumes.
	VolumeMiB(ctx context.Context, tenantID string) (int64, error)
	// ClaimVolumes records every claim or none: ECONFLICT (volume-busy)
	// if one asks to write a volume another session writes, ENOTFOUND
	// if a volume is missing.
	ClaimVolumes(ctx context.Context, claims []VolumeClaim) error
	// ReleaseVolumes drops the session's claims.
	ReleaseVolumes(ctx context.Context, sessionID string) error
	// AllVolumeClaims returns every claim of the node ("" for all).
	AllVolumeClaims(ctx context.Context, node string) ([]VolumeClaim, error)

	VolumeSnapshotStore
}

// VolumeService is what the API offers for volumes.
type VolumeService interface {
	CreateVolume(ctx context.Context, tenant *Tenant, req CreateVolumeRequest) (*Volume, error)
	Volume(ctx context.Context, tenant *Tenant, name string) (*Volume, error)
	ListVolumes(ctx context.Context, tenant *Tenant) ([]*Volume, error)
	DeleteVolume(ctx context.Context, tenant *Tenant, name string) error

	// CreateVolumeSnapshot seals a copy of the volume's files into the
	// blob store; ListVolumeSnapshots and DeleteVolumeSnapshot keep them
	// (volume_snapshot.go).
	CreateVolumeSnapshot(ctx context.Context, tenant *Tenant, volume string, req CreateVolumeSnapshotRequest) (*VolumeSnapshot, error)
	ListVolumeSnapshots(ctx context.Context, tenant *Tenant, volume string) ([]*VolumeSnapshot, error)
	DeleteVolumeSnapshot(ctx context.Context, tenant *Tenant, volume, id string) error
}

// VolumeOnSessionDisk reports whether a volume path lies on the session's
// own disk (below /workspace or /tmp), where the backend makes its mount
// point; any other path must be a directory of the image.
func VolumeOnSessionDisk(p string) bool {
	return strings.HasPrefix(p, "/workspace/") || strings.HasPrefix(p, "/tmp/")
}

// CheckVolumeMountPoint checks that the volume path p (valid, see
// ValidateVolumePath) can be mounted in a sandbox of the image whose
// root file system is rootfs: below /workspace or /tmp, or a directory
// of the image reached through no symbolic link. The image is shared
// and read-only, so no mount point is ever made in it.
func CheckVolumeMountPoint(rootfs, p string) error {
	if VolumeOnSessionDisk(p) {
		return nil
	}
	cur := rootfs
	for _, part := range strings.Split(p[1:], "/") {
		cur = cur + "/" + part
		fi, err := os.Lstat(cur)
		if err != nil || !fi.IsDir() {
			return Problem(EINVALID, "invalid-volume-path",
				"volume path %s is not a directory of the image: mount a volume below /workspace or /tmp, or at a directory the image has (such as /mnt, /srv or /opt)", clip(p, 80))
		}
	}
	return nil
}
