package airlock

import (
	"context"
	"time"
)

// ImageSpec declares an image: a Debian suite, a package list, and the
// agent baked in. Its content hash names the built image.
type ImageSpec struct {
	Name     string   `json:"name"`
	Suite    string   `json:"suite"`
	Packages []string `json:"packages"`
	// From names another shipped spec whose stage this one starts from:
	// a copy of that stage's rootfs with the packages this spec has
	// beyond the parent's installed by apt-get. Packages still lists
	// every package (the parent's too), and Suite is the parent's. Empty:
	// the stage is a debootstrap of its own.
	From string `json:"from,omitempty"`
	// Env is set for every process in the sandbox (e.g. MPLBACKEND=Agg).
	Env map[string]string `json:"env,omitempty"`
	// Files are written into the rootfs after the packages are installed:
	// absolute path -> content (mode 0644, owned by root).
	Files map[string]string `json:"files,omitempty"`
}

// Image is a built, read-only rootfs.
type Image struct {
	Name      string    `json:"name"`
	Hash      string    `json:"hash"`
	Rootfs    string    `json:"rootfs"` // host path, read-only
	SizeBytes int64     `json:"size_bytes"`
	Env       []string  `json:"env,omitempty"` // KEY=VALUE
	BuiltAt   time.Time `json:"built_at"`
	// StartCmd, when set, is started in every sandbox of the image (a
	// template's start_cmd) and ReadyCmd run until it succeeds, before
	// the sandbox is handed out or its base snapshot taken.
	StartCmd string `json:"start_cmd,omitempty"`
	ReadyCmd string `json:"ready_cmd,omitempty"`
	// MemorySnapshotID, on the image of a template made from a session
	// with its memory, is the memory snapshot sessions from the template
	// are restored from (one-shot runs use Rootfs alone).
	MemorySnapshotID string `json:"memory_snapshot_id,omitempty"`
}

// ImageResolver finds a built image by name.
type ImageResolver interface {
	Resolve(ctx context.Context, name string) (*Image, error)
}

// ProblemImageBuilding is the problem type of a request for an image the
// node is still building (503; try again after Retry-After).
const ProblemImageBuilding = "image-building"

// ErrImageBuilding is wrapped by an ImageResolver's error for an image
// that is not built yet but is being built: a caller may wait, or serve
// the request from another image that does everything it needs.
var ErrImageBuilding = &Error{Code: EUNAVAILABLE, Type: ProblemImageBuilding, Message: "image is being built"}
