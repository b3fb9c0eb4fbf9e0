package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/image"
)

// Service records, builds, resolves and deletes templates.
type Service struct {
	cfg Config
	dir string

	ctx    context.Context // ended by Close: builds stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}

	mu     sync.Mutex
	builds map[string]*running  // by template ID
	pulls  map[string]*pullCall // by template ID (objects.go)
	// deleteMemory deletes the memory snapshot a template from a
	// session holds (OnDeleteMemory).
	deleteMemory func(ctx context.Context, tenant *airlock.Tenant, snapshotID string) error
}

// running is a build in progress.
type running struct {
	log    *buildLog
	cancel context.CancelFunc
}

var (
	_ airlock.TemplateService  = (*Service)(nil)
	_ airlock.TemplateResolver = (*Service)(nil)
)

// New validates cfg, clears builds an earlier process left unfinished and
// returns a Service.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, dir: filepath.Join(state, "templates"), sem: make(chan struct{}, cfg.Concurrent), builds: map[string]*running{},
		pulls: map[string]*pullCall{}}
	for _, d := range []string{s.dir, s.tmpDir(), s.logsDir(), s.contextsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// The templates directory must be traversable by the sandbox's
	// gofer; rootfs directories are 0755.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		os.RemoveAll(filepath.Join(s.tmpDir(), e.Name()))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the builds in progress (they are recorded failed) and waits
// for them.
func (s *Service) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Dir returns the directory holding the templates.
func (s *Service) Dir() string { return s.dir }

func (s *Service) tmpDir() string             { return filepath.Join(s.dir, ".tmp") }
func (s *Service) logsDir() string            { return filepath.Join(s.dir, "logs") }
func (s *Service) logPath(id string) string   { return filepath.Join(s.logsDir(), id+".log") }
func (s *Service) rootfsDir(id string) string { return filepath.Join(s.dir, id) }

// CreateTemplate records the template building and starts its build.
func (s *Service) CreateTemplate(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateTemplateRequest) (*airlock.Template, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	src, _ := req.Source()
	build := s.cfg.Builders[src]
	if build == nil {
		return nil, airlock.Problem(airlock.ENOTIMPLEMENTED, "template-source-unsupported", "templates from %s are not built by this server", src)
	}
	if req.Network != nil && tenant == nil {
		return nil, airlock.Problem(airlock.EINVALID, "invalid-template-source", "network is for a tenant's build (its egress log and budget are a tenant's), not an operator template's")
	}
	if v := s.cfg.Validators[src]; v != nil {
		if err := v(&req); err != nil {
			return nil, err
		}
	}
	var ctxPath string
	if req.Context != "" {
		p, err := s.contextFor(tenant, req.Context)
		if err != nil {
			return nil, err
		}
		ctxPath = p
	}
	if err := s.checkQuota(ctx, tenant, 0); err != nil {
		return nil, err
	}
	t := &airlock.Template{
		ID: airlock.NewID(), Name: req.Name, TenantID: tenantID(tenant), Status: airlock.TemplateBuilding, Source: src,
		FromImage: req.FromImage, ContextID: req.Context, StartCmd: req.StartCmd, ReadyCmd: req.ReadyCmd,
	}
	if err := s.cfg.Store.CreateTemplate(ctx, t); err != nil {
		return nil, err
	}
	log, err := newBuildLog(s.logPath(t.ID))
	if err != nil {
		s.cfg.Store.DeleteTemplate(context.WithoutCancel(ctx), t.ID)
		return nil, err
	}
	bctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.builds[t.ID] = &running{log: log, cancel: cancel}
	s.mu.Unlock()
	br := &BuildRequest{Template: *t, Request: req, ContextPath: ctxPath, MaxBytes: s.cfg.MaxBytes, MaxFiles: s.cfg.MaxFiles}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.build(bctx, br, build, log)
	}()
	out := *t
	return &out, nil
}

// checkQuota refuses when the tenant's templates, with adding more bytes,
// are over the quota.
func (s *Service) checkQuota(ctx context.Context, tenant *airlock.Tenant, adding int64) error {
	if tenant == nil || s.cfg.QuotaBytes < 0 {
		return nil
	}
	used, err := s.cfg.Store.TemplateBytes(ctx, tenant.ID)
	if err != nil {
		return err
	}
	if used+adding > s.cfg.QuotaBytes || (adding == 0 && used >= s.cfg.QuotaBytes) {
		return airlock.Problem(airlock.EFORBIDDEN, "template-quota-exceeded",
			"the tenant's templates would take %d bytes, over its template storage quota of %d bytes; delete a template first", used+adding, s.cfg.QuotaBytes).
			With("used_bytes", used).With("quota_bytes", s.cfg.QuotaBytes)
	}
	return nil
}

// build runs one build to its end and records the outcome.
func (s *Service) build(ctx context.Context, br *BuildRequest, build Builder, log *buildLog) {
	t := br.Template
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(log, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	defer func() {
		s.mu.Lock()
		delete(s.builds, t.ID)
		s.mu.Unlock()
		log.Close()
	}()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
	}
	tmp := filepath.Join(s.tmpDir(), t.ID)
	defer os.RemoveAll(tmp)
	err := ctx.Err()
	var res *BuildResult
	var fin *image.Finished
	rootfs := filepath.Join(tmp, "rootfs")
	if err == nil {
		logf("build template %s (%s)", t.Name, t.Source)
		err = os.MkdirAll(rootfs, 0o755)
	}
	if err == nil {
		res, err = build(ctx, br, log, rootfs)
	}
	if err == nil {
		logf("add the agent and hardening, scan for credentials")
		fin, err = image.Finish(ctx, image.FinishConfig{Name: "template " + t.Name, AgentPath: s.cfg.AgentPath, Secrets: s.cfg.Secrets, Progress: log}, rootfs)
	}
	if err == nil && br.MaxBytes > 0 && fin.SizeBytes > br.MaxBytes {
		err = airlock.Problem(airlock.ETOOLARGE, "template-too-large", "the template's filesystem is %d bytes, over the limit of %d bytes", fin.SizeBytes, br.MaxBytes)
	}
	if err == nil && t.TenantID != "" {
		err = s.checkQuota(ctx, &airlock.Tenant{ID: t.TenantID}, fin.SizeBytes)
	}
	if err == nil {
		err = s.publish(ctx, &t, res, fin, tmp, logf)
	}
	if err == nil {
		logf("ready: %s (%s)", t.Name, image.HumanSize(t.SizeBytes))
		return
	}
	reason, line := s.reasonOf(t, err)
	logf("failed: %s", reason)
	t.Status, t.Reason, t.FailedLine = airlock.TemplateFailed, reason, line
	if uerr := s.cfg.Store.UpdateTemplate(context.WithoutCancel(ctx), &t); uerr != nil && airlock.ErrorCode(uerr) != airlock.ENOTFOUND {
		s.cfg.Logger.Error("record failed template build", "template", t.ID, "err", uerr)
	}
}

// publish moves the finished rootfs into place and records the template
// ready; a template deleted meanwhile is removed again.
func (s *Service) publish(ctx context.Context, t *airlock.Template, res *BuildResult, fin *image.Finished, tmp string, logf func(string, ...any)) error {
	if res == nil {
		res = &BuildResult{}
	}
	h := sha256.Sum256([]byte(t.ID + "\x00" + res.Digest + "\x00" + fin.AgentSHA256 + "\x00" + image.RecipeVersion))
	meta, _ := json.MarshalIndent(templateMeta{Template: t.ID, Digest: res.Digest, Layers: res.Layers, BuildCache: res.Cache, Finished: fin}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "template.json"), meta, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if s.cfg.Blobs != nil {
		// Into the fleet's object store, for the nodes that do not hold
		// it; a template that cannot be uploaded is still ready here.
		logf("upload to the object store")
		start := time.Now()
		if digest, n, err := s.upload(ctx, t.ID, tmp); err != nil {
			s.cfg.Logger.Error("upload a template to the object store", "template", t.ID, "err", err)
			logf("not uploaded (the server's log has the details): the template is on this node only")
		} else {
			t.BlobDigest = digest
			logf("uploaded %s (%s) in %.1fs", digest, image.HumanSize(n), time.Since(start).Seconds())
		}
	}
	if err := os.Rename(tmp, s.rootfsDir(t.ID)); err != nil {
		s.deleteObject(ctx, t)
		return err
	}
	now := time.Now().UTC()
	t.Status, t.Digest, t.ImageHash, t.SizeBytes = airlock.TemplateReady, res.Digest, hex.EncodeToString(h[:]), fin.SizeBytes
	t.Env, t.Workdir, t.User, t.ReadyAt = res.Env, res.Workdir, res.User, &now
	if err := s.cfg.Store.UpdateTemplate(context.WithoutCancel(ctx), t); err != nil {
		s.removeRootfs(t.ID)
		s.deleteObject(ctx, t)
		return err
	}
	return nil
}

// templateMeta is <template_id>/template.json.
type templateMeta struct {
	Template string `json:"template_id"`
	Digest   string `json:"digest"`
	// Layers are the cached layers the rootfs came from (absent in
	// templates published before the field, and for sources without
	// layers).
	Layers []string `json:"layers,omitempty"`
	// BuildCache are the build-cache entries a Dockerfile build used
	// (BuildResult.Cache).
	BuildCache []string        `json:"build_cache,omitempty"`
	Finished   *image.Finished `json:"finished"`
}

// reasonOf is what a client is shown of a failed build.
func (s *Service) reasonOf(t airlock.Template, err error) (string, int) {
	line := 0
	var se *StepError
	if errors.As(err, &se) {
		line = se.Line
	}
	var ae *airlock.Error
	switch {
	case errors.As(err, &ae):
		msg := ae.Message
		if ae.Err != nil && ae.Code != airlock.EINTERNAL {
			msg += ": " + ae.Err.Error()
		}
		if ae.Type != "" {
			msg = ae.Type + ": " + msg
		}
		return msg, line
	case errors.Is(err, context.Canceled):
		return "the build was stopped (the template was deleted or the server stopped)", line
	case se != nil:
		return se.Error(), line
	}
	s.cfg.Logger.Error("template build failed", "template", t.ID, "err", err)
	return "internal error: the build failed; the server's log has the details", line
}

// removeRootfs removes a published template's directory.
func (s *Service) removeRootfs(id string) {
	dir := s.rootfsDir(id)
	trash := filepath.Join(s.tmpDir(), "rm-"+id)
	if err := os.Rename(dir, trash); err == nil {
		dir = trash
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.cfg.Logger.Error("remove template", "template", id, "err", err)
	}
}

// lookup returns the tenant's template of that name, else the
// operator's.
func (s *Service) lookup(ctx context.Context, tenant string, name string) (*airlock.Template, error) {
	if err := airlock.ValidateTemplateName(name); err != nil {
		return nil, airlock.Problem(airlock.ENOTFOUND, "template-not-found", "template %q not found", name)
	}
	if tenant != "" {
		t, err := s.cfg.Store.TemplateByName(ctx, tenant, name)
		if err == nil || airlock.ErrorCode(err) != airlock.ENOTFOUND {
			return t, err
		}
	}
	return s.cfg.Store.TemplateByName(ctx, "", name)
}

// GetTemplate returns the tenant's template of that name, else the
// operator's.
func (s *Service) GetTemplate(ctx context.Context, tenant *airlock.Tenant, name string) (*airlock.Template, error) {
	return s.lookup(ctx, tenantID(tenant), name)
}

// ListTemplates returns the tenant's templates and the operator's.
func (s *Service) ListTemplates(ctx context.Context, tenant *airlock.Tenant) ([]airlock.Template, error) {
	return s.cfg.Store.ListTemplates(ctx, tenantID(tenant))
}

// DeleteTemplate removes the tenant's own template: a build in progress
// is stopped; a template a live session runs from is refused (409).
func (s *Service) DeleteTemplate(ctx context.Context, tenant *airlock.Tenant, name string) error {
	t, err := s.lookup(ctx, tenantID(tenant), name)
	if err != nil {
		return err
	}
	if t.TenantID != tenantID(tenant) {
		return airlock.Problem(airlock.EFORBIDDEN, "template-not-owned", "template %q is the operator's: only an operator key deletes it", name)
	}
	n, err := s.cfg.Store.LiveSessionsOnImage(ctx, t.ImageName())
	if err != nil {
		return err
	}
	if n > 0 {
		return airlock.Problem(airlock.ECONFLICT, "template-in-use", "template %q is used by %d live sessions; delete them first", name, n).With("sessions", n)
	}
	if err := s.cfg.Store.DeleteTemplate(ctx, t.ID); err != nil {
		return err
	}
	s.mu.Lock()
	if b := s.builds[t.ID]; b != nil {
		b.cancel()
	}
	delMem := s.deleteMemory
	s.mu.Unlock()
	if s.cfg.Forget != nil {
		s.cfg.Forget(t.ImageName())
	}
	if t.MemorySnapshotID != "" && delMem != nil {
		if err := delMem(ctx, &airlock.Tenant{ID: t.TenantID}, t.MemorySnapshotID); err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
			s.cfg.Logger.Error("delete a template's memory snapshot", "template", t.ID, "snapshot", t.MemorySnapshotID, "err", err)
		}
	}
	s.deleteObject(ctx, t)
	s.removeRootfs(t.ID)
	os.Remove(s.logPath(t.ID))
	return nil
}

// TemplateLog opens the build log of a template the tenant sees.
func (s *Service) TemplateLog(ctx context.Context, tenant *airlock.Tenant, name string) (io.ReadCloser, error) {
	t, err := s.lookup(ctx, tenantID(tenant), name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	var live *buildLog
	if b := s.builds[t.ID]; b != nil {
		live = b.log
	}
	s.mu.Unlock()
	r, err := openLog(ctx, s.logPath(t.ID), live)
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(strings.NewReader("")), nil // built on another node, or by an older server
	}
	return r, err
}

// ResolveTemplate returns the image of the tenant's template of that
// name, else the operator's.
func (s *Service) ResolveTemplate(ctx context.Context, tenantID, name string) (*airlock.Image, error) {
	t, err := s.lookup(ctx, tenantID, name)
	if err != nil {
		return nil, err
	}
	return s.imageOf(ctx, t)
}

// imageOf is the image of a ready template, pulled from the object store
// first when this node does not hold it.
func (s *Service) imageOf(ctx context.Context, t *airlock.Template) (*airlock.Image, error) {
	switch t.Status {
	case airlock.TemplateBuilding:
		return nil, airlock.Problem(airlock.ECONFLICT, "template-not-ready", "template %q is still building; see GET /v1/templates/%s", t.Name, t.Name)
	case airlock.TemplateFailed:
		return nil, airlock.Problem(airlock.EUNPROCESSABLE, "template-failed", "template %q failed to build: %s", t.Name, t.Reason)
	}
	if err := s.ensureLocal(ctx, t); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(s.rootfsDir(t.ID), "rootfs")
	img := &airlock.Image{Name: t.ImageName(), Hash: t.ImageHash, Rootfs: rootfs, SizeBytes: t.SizeBytes, Env: append([]string(nil), t.Env...),
		StartCmd: t.StartCmd, ReadyCmd: t.ReadyCmd, MemorySnapshotID: t.MemorySnapshotID}
	if t.ReadyAt != nil {
		img.BuiltAt = *t.ReadyAt
	}
	return img, nil
}

// Images returns a resolver that answers the names of templates' images
// ("template:<template_id>") itself and every other name from base: for
// the paths that resolve a recorded session's image again.
func (s *Service) Images(base airlock.ImageResolver) airlock.ImageResolver {
	return &images{s: s, base: base}
}

type images struct {
	s    *Service
	base airlock.ImageResolver
}

func (r *images) Resolve(ctx context.Context, name string) (*airlock.Image, error) {
	id, ok := strings.CutPrefix(name, airlock.TemplateImagePrefix)
	if !ok {
		return r.base.Resolve(ctx, name)
	}
	t, err := r.s.cfg.Store.TemplateByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.s.imageOf(ctx, t)
}

// Recover records the builds an earlier process left building as failed.
func (s *Service) Recover(ctx context.Context) (int, error) {
	return s.cfg.Store.FailBuildingTemplates(ctx, "interrupted: the server stopped during the build")
}
