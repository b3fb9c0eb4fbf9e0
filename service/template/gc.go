package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/image"
)

// GCStore is what the garbage collector asks the store.
type GCStore interface {
	TemplateByID(ctx context.Context, id string) (*airlock.Template, error)
	// LiveSessionsOnImage counts the sessions not yet ended (running or
	// paused) on an image name ("template:<template_id>").
	LiveSessionsOnImage(ctx context.Context, image string) (int, error)
}

// CollectConfig configures Collect.
type CollectConfig struct {
	// StateDir is the node's state directory (templates in
	// StateDir/templates).
	StateDir string
	Store    GCStore
	// SnapshotDir holds the node's base snapshots ("" for none): those
	// of templates that no longer exist are removed.
	SnapshotDir string
	// Building reports whether builds are in progress on the node: while
	// one is, cached layers are kept (a pull caches layers before its
	// template lists them). Nil: none.
	Building func() bool
	// LayerGrace keeps cached layers younger than this whatever lists
	// them (1 hour).
	LayerGrace time.Duration
	// CacheGrace keeps the Dockerfile step cache's entries and the
	// registry images FROM pulled that were used less than this ago,
	// whatever lists them (24 hours; see gc_cache.go).
	CacheGrace time.Duration
	DryRun     bool
}

// Collected is what Collect removed (or would remove).
type Collected struct {
	// Templates are template directories with no template record that no
	// live or paused session runs from (a template deleted while its
	// rootfs could not be removed, or while the node was down).
	Templates []string
	// Snapshots are base snapshot directories of such templates.
	Snapshots []string
	// Layers are cached layers no template lists.
	Layers []string
	// BuildCache are Dockerfile step layers and results, and FromImages
	// registry images a Dockerfile's FROM pulled, that no template lists
	// and no build in progress uses, idle for CacheGrace.
	BuildCache []string
	FromImages []string
	// FreedBytes is what removing all of them frees.
	FreedBytes int64
}

// Removed lists every directory and file removed.
func (c *Collected) Removed() []string {
	out := append(append(append([]string(nil), c.Templates...), c.Snapshots...), c.Layers...)
	return append(append(out, c.BuildCache...), c.FromImages...)
}

// Collect removes what no template uses: template directories without a
// record and without a session on them, base snapshots of templates that
// no longer exist, cached layers no remaining template lists, and what
// Dockerfile builds left (step-cache entries and registry images for
// FROM) that no template lists and no build in progress uses. It
// runs beside the server (the server's garbage collector, or
// `airlock node image prune`): it removes only what no record refers to.
func Collect(ctx context.Context, cfg CollectConfig) (*Collected, error) {
	if cfg.StateDir == "" || cfg.Store == nil {
		return nil, errors.New("template gc: no state directory or store")
	}
	if cfg.LayerGrace <= 0 {
		cfg.LayerGrace = time.Hour
	}
	if cfg.CacheGrace <= 0 {
		cfg.CacheGrace = 24 * time.Hour
	}
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(state, "templates")
	out := &Collected{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	layersUsed := map[string]bool{}
	layersKnown := true
	cacheUsed := map[string]bool{} // build-cache entries templates list
	exists := map[string]bool{}    // template IDs with a record
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !isTemplateID(id) {
			continue
		}
		t, err := cfg.Store.TemplateByID(ctx, id)
		switch {
		case err == nil:
			exists[id] = true
			for _, p := range readBuildCache(filepath.Join(dir, id)) {
				cacheUsed[p] = true
			}
			known, layers := readLayers(filepath.Join(dir, id))
			if !known && (t.Source == airlock.TemplateFromImage || t.Source == airlock.TemplateFromArchive) {
				layersKnown = false
			}
			for _, l := range layers {
				layersUsed[l] = true
			}
			continue
		case airlock.ErrorCode(err) != airlock.ENOTFOUND:
			return nil, err
		}
		n, err := cfg.Store.LiveSessionsOnImage(ctx, airlock.TemplateImagePrefix+id)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			exists[id] = true // its sessions still run on it
			for _, p := range readBuildCache(filepath.Join(dir, id)) {
				cacheUsed[p] = true
			}
			continue
		}
		out.Templates = append(out.Templates, filepath.Join(dir, id))
	}
	if cfg.SnapshotDir != "" {
		sents, err := os.ReadDir(cfg.SnapshotDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for _, e := range sents {
			rest, ok := strings.CutPrefix(e.Name(), airlock.TemplateImagePrefix)
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, "-")
			if exists[id] {
				continue
			}
			if _, err := cfg.Store.TemplateByID(ctx, id); airlock.ErrorCode(err) != airlock.ENOTFOUND {
				continue // it exists (built after the listing), or the store failed: keep it
			}
			out.Snapshots = append(out.Snapshots, filepath.Join(cfg.SnapshotDir, e.Name()))
		}
	}
	if layersKnown && (cfg.Building == nil || !cfg.Building()) {
		ldir := filepath.Join(dir, "layers", "sha256")
		lents, err := os.ReadDir(ldir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for _, e := range lents {
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || layersUsed["sha256:"+e.Name()] {
				continue
			}
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < cfg.LayerGrace {
				continue
			}
			out.Layers = append(out.Layers, filepath.Join(ldir, e.Name()))
		}
	}
	pins, err := ReadPins(PinsDir(filepath.Join(dir, dockerfileDir)))
	if err != nil {
		return nil, fmt.Errorf("template gc: the builds' pins: %w", err)
	}
	now := time.Now()
	if out.BuildCache, out.FromImages, err = cacheCandidates(dir, cacheUsed, pins, cfg.CacheGrace, now); err != nil {
		return nil, err
	}
	if out.FreedBytes, err = image.ExclusiveBytes(out.Removed()); err != nil {
		return nil, err
	}
	if cfg.DryRun {
		return out, nil
	}
	// A build may have taken an entry since it was listed: look again.
	if out.BuildCache, out.FromImages, err = stillUnclaimed(dir, out.BuildCache, out.FromImages, cfg.CacheGrace, now); err != nil {
		return nil, err
	}
	for _, p := range out.Removed() {
		if err := os.RemoveAll(p); err != nil {
			return out, err
		}
	}
	for _, p := range out.Templates {
		os.Remove(filepath.Join(dir, "logs", filepath.Base(p)+".log"))
	}
	return out, nil
}

// isTemplateID reports whether a name in the templates directory is a
// template's (not logs, contexts, layers, the Dockerfile cache, the
// registry images Dockerfiles start FROM, or a build in progress).
func isTemplateID(name string) bool {
	switch name {
	case "logs", "contexts", "layers", "dockerfile", "from":
		return false
	}
	return name != "" && name[0] != '.'
}

// readBuildCache reads the build-cache entries a template's
// template.json lists (none for templates not built from a Dockerfile,
// and for those published before the field).
func readBuildCache(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "template.json"))
	if err != nil {
		return nil
	}
	var m struct {
		BuildCache []string `json:"build_cache"`
	}
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	for i, p := range m.BuildCache {
		m.BuildCache[i] = filepath.Clean(p)
	}
	return m.BuildCache
}

// readLayers reads the layers a template's template.json lists; known is
// false when it lists none (published before the field).
func readLayers(dir string) (known bool, layers []string) {
	b, err := os.ReadFile(filepath.Join(dir, "template.json"))
	if err != nil {
		return false, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false, nil
	}
	raw, ok := m["layers"]
	if !ok || json.Unmarshal(raw, &layers) != nil {
		return false, nil
	}
	return true, layers
}

// Building reports whether a build is in progress on this service.
func (s *Service) Building() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.builds) > 0
}
