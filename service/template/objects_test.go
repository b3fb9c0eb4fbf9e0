package template_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/template"
)

// gatedBlobs counts the opens of an object store and holds each open
// until released.
type gatedBlobs struct {
	airlock.Blobs
	mu      sync.Mutex
	opens   int
	release chan struct{}
}

func (g *gatedBlobs) Open(ctx context.Context, key string) (io.ReadSeekCloser, int64, error) {
	g.mu.Lock()
	g.opens++
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return g.Blobs.Open(ctx, key)
}

func (g *gatedBlobs) openCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opens
}

// pullRecorder records the pulls a Service reports.
type pullRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (p *pullRecorder) record(_ string, _ time.Duration, err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

func (p *pullRecorder) all() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

// templateArchive makes a template directory (rootfs with a file, a hard
// link to it and a symbolic link; template.json) and returns its
// archive and the archive's digest.
func templateArchive(t *testing.T, id, marker string) ([]byte, string) {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"opt", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "opt", "marker"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(rootfs, "opt", "marker"), filepath.Join(rootfs, "opt", "marker2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("marker", filepath.Join(rootfs, "opt", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "template.json"), []byte(`{"template_id": "`+id+`", "digest": ""}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := template.WriteArchive(context.Background(), dir, &buf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:])
}

// pullService is a Service whose templates were built elsewhere: its
// store holds the records, the object store the archives.
func pullService(t *testing.T, store *memStore, blobs airlock.Blobs, rec *pullRecorder) *template.Service {
	t.Helper()
	svc, err := template.New(template.Config{StateDir: t.TempDir(), Store: store, AgentPath: "/nonexistent/airlock-agent",
		Blobs: blobs, OnPull: rec.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

// readyTemplate records a ready template of tenant t1 whose archive has
// the digest.
func readyTemplate(t *testing.T, store *memStore, id, name, digest string) {
	t.Helper()
	now := time.Now()
	if err := store.CreateTemplate(context.Background(), &airlock.Template{ID: id, Name: name, TenantID: "t1", Status: airlock.TemplateReady,
		Source: airlock.TemplateFromDockerfile, ImageHash: "h-" + id, BlobDigest: digest, ReadyAt: &now}); err != nil {
		t.Fatal(err)
	}
}

// TestPullOnce: requests for a template the node does not hold, made
// at once, wait for one pull from the object store; the pulled rootfs
// has the archive's files, hard link and symbolic link; the next request
// pulls nothing.
func TestPullOnce(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	objects, err := disk.New(disk.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := airlock.NewID()
	archive, digest := templateArchive(t, id, "only-in-template\n")
	if _, err := objects.Put(ctx, airlock.TemplateBlobKey(id, digest), bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	readyTemplate(t, store, id, "pulled", digest)
	gate := &gatedBlobs{Blobs: objects, release: make(chan struct{})}
	rec := &pullRecorder{}
	svc := pullService(t, store, gate, rec)
	if held := svc.Held(); len(held) != 0 {
		t.Fatalf("held before any pull: %v", held)
	}

	const n = 5
	imgs := make([]*airlock.Image, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			imgs[i], errs[i] = svc.ResolveTemplate(ctx, "t1", "pulled")
		}()
	}
	// Every request waits on the one pull, which is held in its open.
	testreq.Eventually(t, 10*time.Second, "every request waiting for the pull", func() bool { return svc.PullWaiters(id) == n })
	close(gate.release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if imgs[i].Rootfs != imgs[0].Rootfs || imgs[i].Name != airlock.TemplateImagePrefix+id {
			t.Fatalf("request %d: image %+v, want %+v", i, imgs[i], imgs[0])
		}
	}
	if got := gate.openCount(); got != 1 {
		t.Errorf("the object store was opened %d times for %d requests, want once", got, n)
	}
	if got := rec.all(); len(got) != 1 || got[0] != nil {
		t.Errorf("pulls reported: %v, want one that succeeded", got)
	}
	rootfs := imgs[0].Rootfs
	if b, err := os.ReadFile(filepath.Join(rootfs, "opt", "marker")); err != nil || string(b) != "only-in-template\n" {
		t.Errorf("pulled marker: %q %v", b, err)
	}
	a, errA := os.Stat(filepath.Join(rootfs, "opt", "marker"))
	b, errB := os.Stat(filepath.Join(rootfs, "opt", "marker2"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("marker2 is not a hard link of marker: %v %v", errA, errB)
	}
	if to, err := os.Readlink(filepath.Join(rootfs, "opt", "link")); err != nil || to != "marker" {
		t.Errorf("symbolic link: %q %v", to, err)
	}
	if held := svc.Held(); len(held) != 1 || held[0] != id {
		t.Errorf("held after the pull: %v, want [%s]", held, id)
	}

	// Served from disk from now on.
	if _, err := svc.ResolveTemplate(ctx, "t1", "pulled"); err != nil {
		t.Fatal(err)
	}
	if got := gate.openCount(); got != 1 {
		t.Errorf("a second request opened the object store again (%d opens)", got)
	}
	// Another tenant does not see it.
	if _, err := svc.ResolveTemplate(ctx, "t2", "pulled"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("another tenant resolved the template: %v", err)
	}
}

// TestPullDigestRefused: an object whose digest is not the one the
// template's record holds (another archive put under its key) is refused:
// 503 template-not-on-node, nothing published, no scratch left; so is a
// template whose object is missing, and one with no object at all.
func TestPullDigestRefused(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	objects, err := disk.New(disk.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := airlock.NewID()
	_, digest := templateArchive(t, id, "only-in-template\n")
	evil, evilDigest := templateArchive(t, id, "tampered\n")
	if evilDigest == digest {
		t.Fatal("two different archives with one digest")
	}
	// The tampered archive sits where the recorded digest says.
	if _, err := objects.Put(ctx, airlock.TemplateBlobKey(id, digest), bytes.NewReader(evil)); err != nil {
		t.Fatal(err)
	}
	readyTemplate(t, store, id, "tampered", digest)
	rec := &pullRecorder{}
	svc := pullService(t, store, objects, rec)

	_, err = svc.ResolveTemplate(ctx, "t1", "tampered")
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code != airlock.EUNAVAILABLE || ae.Type != "template-not-on-node" {
		t.Fatalf("tampered object: %v, want 503 template-not-on-node", err)
	}
	if got := rec.all(); len(got) != 1 || !errors.Is(got[0], template.ErrDigestMismatch) {
		t.Errorf("pulls reported: %v, want one refused for its digest", got)
	}
	if _, err := os.Stat(filepath.Join(svc.Dir(), id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tampered template was published: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(svc.Dir(), ".tmp")); len(ents) != 0 {
		t.Errorf("scratch left in .tmp: %v", ents)
	}
	if held := svc.Held(); len(held) != 0 {
		t.Errorf("held: %v", held)
	}

	// Missing object; no object recorded.
	gone := airlock.NewID()
	readyTemplate(t, store, gone, "gone", "sha256:"+hex.EncodeToString(make([]byte, 32)))
	if _, err := svc.ResolveTemplate(ctx, "t1", "gone"); !errors.As(err, &ae) || ae.Type != "template-not-on-node" {
		t.Errorf("missing object: %v", err)
	}
	local := airlock.NewID()
	readyTemplate(t, store, local, "local-only", "")
	if _, err := svc.ResolveTemplate(ctx, "t1", "local-only"); !errors.As(err, &ae) || ae.Type != "template-not-on-node" {
		t.Errorf("template without an object: %v", err)
	}
	if got := len(rec.all()); got != 2 {
		t.Errorf("%d pulls reported, want 2 (a template without an object is not pulled)", got)
	}
}
