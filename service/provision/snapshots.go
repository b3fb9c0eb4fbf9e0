package provision

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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// snapshotManifest is written next to a checkpoint's files and checked
// before the checkpoint is trusted.
type snapshotManifest struct {
	Key       string            `json:"key"`
	Image     string            `json:"image"`
	ImageHash string            `json:"image_hash"`
	Language  airlock.Language  `json:"language"`
	Recipe    Recipe            `json:"recipe"`
	Files     map[string]string `json:"files"` // name -> "size:sha256"
	BuiltAt   time.Time         `json:"built_at"`
	BuildMS   int64             `json:"build_ms"`
}

const snapshotManifestFile = "airlock-snapshot.json"

// snapshots keeps the base snapshots of a node under one directory, one
// subdirectory per warm key: built in the background, verified before
// first use, rebuilt when missing or found bad. A request never waits for
// a snapshot: without one it gets a cold start.
type snapshots struct {
	p   *Provisioner
	dir string

	mu      sync.Mutex
	ready   map[string]string // key id -> verified checkpoint dir
	pending map[string]bool   // key id -> being verified or built
	failed  map[string]time.Time
	refused map[string]bool // key id -> it held a credential: boots cold until restart
	gone    map[string]bool // image name -> forgotten (a deleted template): never built again
}

func newSnapshots(prov *Provisioner, dir string) *snapshots {
	return &snapshots{p: prov, dir: dir, ready: map[string]string{}, pending: map[string]bool{}, failed: map[string]time.Time{}, refused: map[string]bool{}, gone: map[string]bool{}}
}

// snapshotRetry is how long a failed build waits before it is tried again.
const snapshotRetry = time.Minute

// get returns the verified checkpoint of key, or "" after starting, in the
// background, whatever is needed to have one.
func (s *snapshots) get(k warmKey) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.ready[k.id]; ok {
		return d
	}
	if s.pending[k.id] || s.refused[k.id] || s.gone[k.img.Name] || time.Since(s.failed[k.id]) < snapshotRetry {
		return ""
	}
	s.pending[k.id] = true
	s.p.bg.Add(1)
	go func() {
		defer s.p.bg.Done()
		d, err := s.load(s.p.bgCtx, k)
		refused := errors.Is(err, secretscan.ErrFound)
		s.mu.Lock()
		delete(s.pending, k.id)
		switch {
		case err == nil && s.gone[k.img.Name]:
			// Forgotten while it was built.
			os.RemoveAll(d)
		case refused:
			// Not retried: the same image and environment would make
			// the same snapshot.
			s.refused[k.id] = true
		case err != nil:
			s.failed[k.id] = time.Now()
		default:
			s.ready[k.id] = d
			delete(s.failed, k.id)
		}
		s.mu.Unlock()
		switch {
		case refused:
			s.p.cfg.Logger.Error("base snapshot refused: it would hold a credential; requests for its key start cold until airlockd restarts",
				"key", k.name(), "err", err)
		case err != nil && s.p.bgCtx.Err() == nil:
			s.p.cfg.Logger.Error("base snapshot unavailable; requests start cold", "key", k.name(), "err", err)
		}
	}()
	return ""
}

// markBad drops a snapshot that failed to restore; the next get rebuilds it.
func (s *snapshots) markBad(k warmKey, err error) {
	s.mu.Lock()
	d := s.ready[k.id]
	delete(s.ready, k.id)
	s.mu.Unlock()
	s.p.cfg.Logger.Error("restore from base snapshot failed; rebuilding it", "key", k.name(), "err", err)
	if d != "" {
		os.RemoveAll(d)
	}
	s.p.metrics.snapshotBuilds.WithLabelValues("discarded").Inc()
}

// load verifies the snapshot of k on disk, or builds it.
func (s *snapshots) load(ctx context.Context, k warmKey) (string, error) {
	dir := filepath.Join(s.dir, k.name())
	if _, err := os.Stat(dir); err == nil {
		err := verifySnapshot(dir, k)
		if err == nil {
			// Scanned again: the host's values may have changed since it
			// was made (a new broker credential).
			err = s.scan(ctx, k, dir)
		}
		if err == nil {
			return dir, nil
		}
		s.p.cfg.Logger.Warn("base snapshot on disk not used; rebuilding", "dir", dir, "err", err)
		os.RemoveAll(dir)
	}
	if err := s.build(ctx, k, dir); err != nil {
		result := "failed"
		if errors.Is(err, secretscan.ErrFound) {
			result = "refused"
		}
		s.p.metrics.snapshotBuilds.WithLabelValues(result).Inc()
		return "", err
	}
	s.p.metrics.snapshotBuilds.WithLabelValues("built").Inc()
	return dir, nil
}

// build boots a sandbox, readies it by the recipe and checkpoints it.
func (s *snapshots) build(ctx context.Context, k warmKey, dir string) error {
	snap, ok := k.backend.(airlock.Snapshotter)
	if !ok {
		return errors.New("backend cannot snapshot")
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	// Builds compete with requests for the CPU: one at a time.
	select {
	case s.p.buildSlot <- struct{}{}:
		defer func() { <-s.p.buildSlot }()
	case <-ctx.Done():
		return ctx.Err()
	}
	start := time.Now()
	// What the sandbox will be given, before it is booted: the image's
	// environment and the runtime's.
	subject := "base snapshot " + k.name()
	env := append(slices.Clone(k.img.Env), ProgramEnv...)
	if err := secretscan.Refusal(subject, s.p.cfg.Secrets.ScanEnv(env)); err != nil {
		return err
	}
	sb, err := k.backend.Create(ctx, airlock.SandboxSpec{
		ID: "snap-" + airlock.NewID()[:16], Image: k.img, Limits: k.limits,
		Labels: map[string]string{"airlock.snapshot": k.name()},
	})
	if err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	// What the backend gave it (runsc: the OCI spec's environment).
	if er, ok := sb.(airlock.EnvReporter); ok {
		if err := secretscan.Refusal(subject+" (sandbox environment)", s.p.cfg.Secrets.ScanEnv(er.Env())); err != nil {
			sb.Destroy(context.WithoutCancel(ctx))
			return err
		}
	}
	if err := prepare(ctx, sb, k, true); err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		return err
	}
	if err := startImage(ctx, sb, k.img); err != nil { // destroys sb
		return err
	}
	tmp := filepath.Join(s.dir, ".tmp-"+k.name()+"-"+airlock.NewID()[:8])
	if err := snap.Checkpoint(ctx, sb, tmp); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// What it saved: the memory of the agent and the warm runtime (their
	// environments among it) and the kernel's state. (The agent reports
	// no environment of its own: its protocol has no such request and
	// its file reads are confined to /workspace and /tmp. The runtime's
	// environment is what the host handed it, scanned above, and lives
	// in the memory scanned here.)
	if err := s.scan(ctx, k, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	man := snapshotManifest{
		Key: k.id, Image: k.img.Name, ImageHash: k.img.Hash, Language: k.lang, Recipe: k.recipe,
		BuiltAt: time.Now().UTC(), BuildMS: time.Since(start).Milliseconds(),
	}
	if man.Files, err = hashFiles(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	b, _ := json.MarshalIndent(man, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, snapshotManifestFile), b, 0o600); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	s.p.cfg.Logger.Info("built base snapshot", "key", k.name(), "ms", man.BuildMS)
	return nil
}

// maxCheckpointFile bounds one file of a checkpoint the scan reads: more
// than any sandbox's memory. A larger one is not scanned, and the
// snapshot is not used.
const maxCheckpointFile = 64 << 30

// scan refuses a checkpoint directory holding a host secret or a key
// (secretscan.ModeMemory): a *secretscan.FoundError naming the file and
// offset. A file the scan could not read fails the snapshot too.
func (s *snapshots) scan(ctx context.Context, k warmKey, dir string) error {
	rep, err := s.p.cfg.Secrets.WithMaxFileBytes(maxCheckpointFile).ScanTree(ctx, dir, secretscan.ModeMemory)
	if err != nil {
		return fmt.Errorf("secret scan of the checkpoint: %w", err)
	}
	if err := rep.Err("base snapshot " + k.name() + " (checkpoint)"); err != nil {
		return err
	}
	if len(rep.Skipped) > 0 || rep.Truncated {
		return fmt.Errorf("secret scan of the checkpoint: %s not read (%s)", rep.Skipped[0].Path, rep.Skipped[0].Reason)
	}
	s.p.cfg.Logger.Debug("scanned base snapshot for credentials", "key", k.name(), "bytes", rep.Bytes, "ms", rep.Duration.Milliseconds())
	return nil
}

// prepare readies a fresh sandbox by its key's recipe: the runtime
// started and its modules imported, waiting for code; checkpoint when the
// sandbox is checkpointed next (a base snapshot); and the recipe's code
// context started and idle.
func prepare(ctx context.Context, sb airlock.Sandbox, k warmKey, checkpoint bool) error {
	r := k.recipe
	if r.Runtime != "" {
		if err := sb.Agent().Prepare(ctx, protocol.PrepareRequest{Runtime: r.Runtime, Preload: r.Preload, Env: ProgramEnv, Checkpoint: checkpoint}); err != nil {
			return fmt.Errorf("prepare %s runtime: %w", r.Runtime, err)
		}
	}
	if r.Context != "" {
		id := "ctx-" + airlock.NewID()[:16]
		if _, err := sb.Agent().CreateContext(ctx, protocol.ContextRequest{ID: id, Language: r.Context, MemoryLimitBytes: k.ctxMem}); err != nil {
			return fmt.Errorf("start the ready %s context: %w", r.Context, err)
		}
		if len(r.ContextPreload) > 0 {
			res, err := sb.Agent().RunCell(ctx, id, contextImports(r.ContextPreload), reseedTimeoutMS, io.Discard, io.Discard)
			if err == nil && (res.Error != nil || res.Died || res.TimedOut) {
				err = fmt.Errorf("the import cell failed (%+v)", res.Error)
			}
			if err != nil {
				return fmt.Errorf("preload the ready %s context: %w", r.Context, err)
			}
		}
	}
	return nil
}

// verifySnapshot checks a snapshot directory against its manifest: the key
// it was made for, and the size and SHA-256 of every file.
func verifySnapshot(dir string, k warmKey) error {
	b, err := os.ReadFile(filepath.Join(dir, snapshotManifestFile))
	if err != nil {
		return err
	}
	var man snapshotManifest
	if err := json.Unmarshal(b, &man); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if man.Key != k.id {
		return fmt.Errorf("made for key %.12s, want %.12s", man.Key, k.id)
	}
	got, err := hashFiles(dir)
	if err != nil {
		return err
	}
	if len(got) != len(man.Files) || len(got) == 0 {
		return fmt.Errorf("files changed: %d on disk, %d in manifest", len(got), len(man.Files))
	}
	for name, want := range man.Files {
		if got[name] != want {
			return fmt.Errorf("%s does not match its manifest", name)
		}
	}
	return nil
}

// hashFiles returns "size:sha256" of every regular file in dir except the
// manifest.
func hashFiles(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	names := []string{}
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != snapshotManifestFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		size, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out[n] = fmt.Sprintf("%d:%s", size, hex.EncodeToString(h.Sum(nil)))
	}
	return out, nil
}

// prune removes snapshot directories no current key uses, and leftovers
// of builds that did not finish. Templates' snapshots are kept (a key of
// a template is known only once it is asked for; its snapshot is
// verified against the key before use, and removed with the template:
// forget, or the garbage collector for a template deleted while the node
// was down).
func (s *snapshots) prune(keep map[string]bool) {
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if !keep[e.Name()] && !strings.HasPrefix(e.Name(), airlock.TemplateImagePrefix) {
			os.RemoveAll(filepath.Join(s.dir, e.Name()))
		}
	}
}

// forget removes every snapshot of the image named name and keeps any
// from being built again.
func (s *snapshots) forget(name string) {
	s.mu.Lock()
	s.gone[name] = true
	for id, d := range s.ready {
		if strings.HasPrefix(filepath.Base(d), name+"-") {
			delete(s.ready, id)
		}
	}
	s.mu.Unlock()
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+"-") {
			os.RemoveAll(filepath.Join(s.dir, e.Name()))
		}
	}
}
