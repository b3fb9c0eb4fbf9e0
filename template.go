package airlock

import (
	"context"
	"io"
	"strings"
	"time"
)

// TemplateStatus is where a template's build is.
type TemplateStatus string

// The template statuses: a template is recorded building, and ends ready
// or failed; a failed template keeps its reason (and the failing line of
// a Dockerfile) until it is deleted.
const (
	TemplateBuilding TemplateStatus = "building"
	TemplateReady    TemplateStatus = "ready"
	TemplateFailed   TemplateStatus = "failed"
)

// TemplateSource says what a template was made from.
type TemplateSource string

// The template sources.
const (
	// TemplateFromImage: an image pulled from an OCI or Docker registry.
	TemplateFromImage TemplateSource = "image"
	// TemplateFromArchive: an uploaded OCI layout or `docker save`
	// archive (a context of POST /v1/templates/contexts).
	TemplateFromArchive TemplateSource = "archive"
	// TemplateFromDockerfile: a Dockerfile built with an uploaded context.
	TemplateFromDockerfile TemplateSource = "dockerfile"
	// TemplateFromSession: a session's filesystem.
	TemplateFromSession TemplateSource = "session"
)

// TemplateImagePrefix starts the name of the airlock.Image a template
// resolves to ("template:<template_id>"). Requests may not name such an
// image directly: they name a template with "template".
const TemplateImagePrefix = "template:"

// Template is a tenant's (or, with an empty TenantID, the operator's)
// image made from an OCI image, a Dockerfile or a session: a read-only
// rootfs with our agent and hardening added, resolved by name from
// "template" on one-shot runs and sessions.
type Template struct {
	ID   string `json:"template_id"`
	Name string `json:"name"`
	// TenantID owns the template; "" is an operator template, visible to
	// every tenant.
	TenantID string         `json:"tenant_id,omitempty"`
	Status   TemplateStatus `json:"status"`
	// Reason says why a build failed.
	Reason string `json:"reason,omitempty"`
	// FailedLine is the Dockerfile line whose step failed (1-based; 0
	// when no line is to blame).
	FailedLine int            `json:"failed_line,omitempty"`
	Source     TemplateSource `json:"source"`
	// FromImage is the image reference of a registry import.
	FromImage string `json:"from_image,omitempty"`
	// ContextID is the uploaded context of an archive import or a
	// Dockerfile build.
	ContextID string `json:"context_id,omitempty"`
	// SessionID is the session a template was made from.
	SessionID string `json:"session_id,omitempty"`
	// MemorySnapshotID is the memory snapshot a template from a session
	// made with include_memory holds: every session started from the
	// template is restored from it (and reseeded). One-shot runs use the
	// template's filesystem only.
	MemorySnapshotID string `json:"memory_snapshot_id,omitempty"`
	// Digest is the source image's manifest digest (sha256:...).
	Digest string `json:"digest,omitempty"`
	// ImageHash names the built rootfs (sha256 of its layers' digests,
	// our agent and the recipe).
	ImageHash string `json:"image_hash,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	// BlobDigest is the digest (sha256:...) of the template's archive in
	// the fleet's object store (TemplateBlobKey), which a node that does
	// not hold the template pulls and checks against it; "" when the
	// template is on its building node only (no shared object store).
	BlobDigest string `json:"blob_digest,omitempty"`
	// StartCmd is started in every sandbox from the template; ReadyCmd
	// must succeed before its base snapshot is taken.
	StartCmd string `json:"start_cmd,omitempty"`
	ReadyCmd string `json:"ready_cmd,omitempty"`
	// Env, Workdir and User come from the image's configuration.
	Env       []string   `json:"env,omitempty"`
	Workdir   string     `json:"workdir,omitempty"`
	User      string     `json:"user,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
}

// ImageName is the name of the airlock.Image the template resolves to.
func (t *Template) ImageName() string { return TemplateImagePrefix + t.ID }

// TemplateBlobKey is where a template's archive lives in the object
// store: under its ID, named by the archive's digest (BlobDigest).
func TemplateBlobKey(id, digest string) string {
	return "templates/" + id + "/" + strings.TrimPrefix(digest, "sha256:") + ".tar.zst"
}

// RegistryAuth is a registry credential given with one import request;
// it is used for that pull and never stored.
type RegistryAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// CreateTemplateRequest is the body of POST /v1/templates. Exactly one
// source: from_image (a registry pull), dockerfile (with an optional
// context), or context alone (an uploaded OCI layout or docker save
// archive).
type CreateTemplateRequest struct {
	Name         string        `json:"name"`
	FromImage    string        `json:"from_image,omitempty"`
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	Dockerfile   string        `json:"dockerfile,omitempty"`
	Context      string        `json:"context,omitempty"`
	StartCmd     string        `json:"start_cmd,omitempty"`
	ReadyCmd     string        `json:"ready_cmd,omitempty"`
	// BuildArgs set the Dockerfile's ARG values (dockerfile only).
	BuildArgs map[string]string `json:"build_args,omitempty"`
	// Network gives the Dockerfile's RUN steps a network through the
	// node's egress proxy, under its allow list (dockerfile only). Without
	// it, RUN steps have no network.
	Network *TemplateNetwork `json:"network,omitempty"`
}

// TemplateNetwork is the network of a Dockerfile build's RUN steps:
// each RUN runs in a network namespace of its own whose only way out is
// the node's egress proxy, which admits the names of Allow (the syntax
// of a session's allow list) and nothing the operator's egress rules
// forbid, and counts the bytes against the tenant's egress budget.
type TemplateNetwork struct {
	Allow []string `json:"allow"`
}

// Policy is the allow list as a sandbox's network policy.
func (n *TemplateNetwork) Policy() NetworkPolicy {
	return NetworkPolicy{Mode: NetworkAllowList, Allow: n.Allow}
}

// Validate checks the allow list: at least one entry, each one a valid
// allow-list entry.
func (n *TemplateNetwork) Validate() error {
	if len(n.Allow) == 0 {
		return Problem(EINVALID, "invalid-network", "network.allow must name at least one host; leave network out for a build without one")
	}
	_, err := ParseAllowList(n.Allow)
	return err
}

// Source returns the request's source kind, or an EINVALID problem when
// it names none or more than one.
func (r *CreateTemplateRequest) Source() (TemplateSource, error) {
	n := 0
	var s TemplateSource
	if r.FromImage != "" {
		n, s = n+1, TemplateFromImage
	}
	if r.Dockerfile != "" {
		n, s = n+1, TemplateFromDockerfile
	}
	if n == 0 && r.Context != "" {
		n, s = 1, TemplateFromArchive
	}
	if n != 1 {
		return "", Problem(EINVALID, "invalid-template-source", "give exactly one source: from_image, dockerfile (with an optional context), or context alone (an uploaded OCI layout or docker save archive)")
	}
	if s == TemplateFromImage && r.Context != "" {
		return "", Problem(EINVALID, "invalid-template-source", "context goes with dockerfile or alone, not with from_image")
	}
	if s != TemplateFromImage && r.RegistryAuth != nil {
		return "", Problem(EINVALID, "invalid-template-source", "registry_auth goes with from_image")
	}
	if s != TemplateFromDockerfile && r.Network != nil {
		return "", Problem(EINVALID, "invalid-template-source", "network goes with dockerfile: it is the network of its RUN steps")
	}
	return s, nil
}

// Limits of a template request.
const (
	MaxTemplateNameBytes = 64
	MaxImageRefBytes     = 512
	MaxTemplateCmdBytes  = 4096
	MaxDockerfileBytes   = 256 << 10
)

// ValidateTemplateName checks a template name: 1-64 characters of a-z,
// 0-9, '-', '_' and '.', starting with a letter or digit.
func ValidateTemplateName(name string) error {
	ok := len(name) >= 1 && len(name) <= MaxTemplateNameBytes
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_' || c == '.'))
	}
	if !ok {
		return Problem(EINVALID, "invalid-template-name", "invalid template name: use 1-%d characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit", MaxTemplateNameBytes)
	}
	return nil
}

// Validate checks the request's shape (not whether its image exists).
func (r *CreateTemplateRequest) Validate() error {
	if err := ValidateTemplateName(r.Name); err != nil {
		return err
	}
	if _, err := r.Source(); err != nil {
		return err
	}
	switch {
	case len(r.FromImage) > MaxImageRefBytes:
		return Problem(EINVALID, "invalid-template-source", "from_image is longer than %d bytes", MaxImageRefBytes)
	case len(r.Dockerfile) > MaxDockerfileBytes:
		return Problem(EINVALID, "invalid-template-source", "dockerfile is longer than %d bytes", MaxDockerfileBytes)
	case len(r.StartCmd) > MaxTemplateCmdBytes || len(r.ReadyCmd) > MaxTemplateCmdBytes:
		return Problem(EINVALID, "invalid-template-source", "start_cmd and ready_cmd may be at most %d bytes", MaxTemplateCmdBytes)
	case strings.ContainsRune(r.FromImage, 0) || strings.ContainsAny(r.FromImage, " \t\r\n"):
		return Problem(EINVALID, "invalid-image-reference", "from_image is not an image reference")
	}
	if r.Network != nil {
		return r.Network.Validate()
	}
	return nil
}

// SessionTemplateRequest is the body of POST /v1/sessions/{id}/template:
// the session's filesystem (and, with IncludeMemory, its processes and
// code contexts) becomes a template of that name, private to the
// session's tenant.
type SessionTemplateRequest struct {
	Name          string `json:"name"`
	IncludeMemory bool   `json:"include_memory,omitempty"`
}

// Validate checks the request's name.
func (r *SessionTemplateRequest) Validate() error {
	return ValidateTemplateName(r.Name)
}

// TemplateContext is an uploaded tar (a build context, an OCI layout or
// a docker save archive), owned by one tenant, named by its ID in
// CreateTemplateRequest.Context.
type TemplateContext struct {
	ID        string    `json:"context_id"`
	TenantID  string    `json:"tenant_id,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// TemplateStore records templates. Names are unique per owner (tenant,
// or "" for the operator).
type TemplateStore interface {
	// CreateTemplate records t (its ID set); ECONFLICT if its owner has
	// a template of that name.
	CreateTemplate(ctx context.Context, t *Template) error
	// TemplateByName returns the owner's template of that name (owner ""
	// is the operator); ENOTFOUND if none.
	TemplateByName(ctx context.Context, tenantID, name string) (*Template, error)
	// TemplateByID returns a template by its ID; ENOTFOUND if none.
	TemplateByID(ctx context.Context, id string) (*Template, error)
	// ListTemplates returns the tenant's templates and the operator's,
	// by name, the tenant's first where names clash. tenantID "" lists
	// the operator's alone.
	ListTemplates(ctx context.Context, tenantID string) ([]Template, error)
	// UpdateTemplate writes the build's outcome: status, reason,
	// failed_line, digest, image_hash, size_bytes, blob_digest, env,
	// workdir, user, ready_at. ENOTFOUND if it was deleted.
	UpdateTemplate(ctx context.Context, t *Template) error
	// DeleteTemplate removes a template's record; ENOTFOUND if none.
	DeleteTemplate(ctx context.Context, id string) error
	// TemplateBytes is the size of the owner's templates (building ones
	// count what they recorded so far).
	TemplateBytes(ctx context.Context, tenantID string) (int64, error)
	// FailBuildingTemplates marks every template still building failed
	// with the reason (at start: no build survives its server).
	FailBuildingTemplates(ctx context.Context, reason string) (int, error)
	// LiveSessionsOnImage counts the sessions not yet ended whose image
	// is the named one.
	LiveSessionsOnImage(ctx context.Context, image string) (int, error)
}

// TemplateResolver finds the image of a template for a tenant: the
// tenant's own template of that name first, then the operator's.
// A template that is not ready is ECONFLICT (building) or
// EUNPROCESSABLE (failed); one that does not exist is ENOTFOUND.
type TemplateResolver interface {
	ResolveTemplate(ctx context.Context, tenantID, name string) (*Image, error)
}

// TemplateService is what the front ends call for templates.
type TemplateService interface {
	TemplateResolver
	// CreateTemplate records the template as building and starts its
	// build in the background. operator makes an operator template
	// (tenant is then nil).
	CreateTemplate(ctx context.Context, tenant *Tenant, req CreateTemplateRequest) (*Template, error)
	// GetTemplate returns the tenant's template of that name, else the
	// operator's (tenant nil: the operator's only).
	GetTemplate(ctx context.Context, tenant *Tenant, name string) (*Template, error)
	// ListTemplates returns the tenant's templates and the operator's.
	ListTemplates(ctx context.Context, tenant *Tenant) ([]Template, error)
	// DeleteTemplate removes the tenant's own template (tenant nil: the
	// operator's); ECONFLICT while a session runs from it.
	DeleteTemplate(ctx context.Context, tenant *Tenant, name string) error
	// TemplateLog opens the build log of a template the tenant sees: the
	// reader returns what was logged and then blocks for more until the
	// build has ended (then io.EOF) or ctx is done.
	TemplateLog(ctx context.Context, tenant *Tenant, name string) (io.ReadCloser, error)
	// UploadContext stores a tar for a later CreateTemplate.
	UploadContext(ctx context.Context, tenant *Tenant, body io.Reader) (*TemplateContext, error)
}

// ResolveRequestImage picks the image of a request that may name an
// image or a template (not both): a template through templates for the
// tenant, else the image (def when empty) through images. An image name
// may not be a template's internal one.
func ResolveRequestImage(ctx context.Context, images ImageResolver, templates TemplateResolver, tenantID, image, template, def string) (*Image, error) {
	if image != "" && template != "" {
		return nil, Problem(EINVALID, "image-and-template", "give image or template, not both")
	}
	if template != "" {
		if templates == nil {
			return nil, Problem(ENOTFOUND, "template-not-found", "template %q not found: templates are not enabled on this server", template)
		}
		return templates.ResolveTemplate(ctx, tenantID, template)
	}
	if strings.HasPrefix(image, TemplateImagePrefix) {
		return nil, Problem(EINVALID, "invalid-image", "image %q is not an image name; name a template with \"template\"", image)
	}
	if image == "" {
		image = def
	}
	return images.Resolve(ctx, image)
}
