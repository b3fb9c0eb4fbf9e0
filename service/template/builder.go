package template

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/airlockhq/airlock"
)

// BuildRequest is what a Builder gets for one template.
type BuildRequest struct {
	// Template is the record as created (ID, name, owner, source, ...).
	Template airlock.Template
	// Request is the request it came from, with its registry_auth (use
	// it for this build only; never log or keep it).
	Request airlock.CreateTemplateRequest
	// ContextPath is the uploaded context's tar on this node, or "".
	ContextPath string
	// MaxBytes and MaxFiles bound what the rootfs may hold (0: no bound).
	MaxBytes int64
	MaxFiles int64
}

// BuildResult is what a Builder found out about the image it built.
type BuildResult struct {
	// Digest is the source image's manifest digest ("sha256:...").
	Digest string
	// Env (KEY=VALUE), Workdir and User are the image's configuration.
	Env     []string
	Workdir string
	User    string
	// Layers are the digests ("sha256:...") of the layers the rootfs was
	// unpacked from, as kept in the layer cache: the garbage collector
	// removes cached layers no template lists.
	Layers []string
	// Cache are the build-cache entries (absolute directories: step
	// layers and results of the Dockerfile builder, the registry image
	// FROM named) the build used: the garbage collector keeps what a
	// template lists, for its rebuilds.
	Cache []string
}

// Builder fills rootfs (an empty directory the service made, inside the
// template's build directory) with the template's filesystem, writing
// what it does, line by line, to log. An error fails the build: a
// *StepError names the failing line; an *airlock.Error's message is shown
// as the reason; any other error is shown as "internal error" and logged.
// The service then adds the agent and hardening, scans for credentials
// and publishes the rootfs; a Builder must write nothing outside rootfs.
type Builder func(ctx context.Context, req *BuildRequest, log io.Writer, rootfs string) (*BuildResult, error)

// StepError is a failed build step of a Dockerfile: Line is 1-based.
type StepError struct {
	Line int
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// ErrNoBuilder is returned for a source kind no Builder serves.
var ErrNoBuilder = errors.New("no builder for this template source")
