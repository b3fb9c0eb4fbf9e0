package template_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/template"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestCollectTemplates builds, in a temporary state directory with a
// real SQLite store: a template with a record, the leftover directory of
// a deleted template a paused session still runs from, and one nothing
// refers to; base snapshots of the first and the last; cached layers the
// first lists, one nobody lists, and one nobody lists that was cached a
// moment ago. Only the unreferenced leftovers go, and a dry run removes
// nothing.
func TestCollectTemplates(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(state, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn := &airlock.Tenant{Name: "gc"}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	kept := &airlock.Template{Name: "kept", TenantID: tn.ID, Status: airlock.TemplateReady, Source: airlock.TemplateFromImage}
	if err := db.CreateTemplate(ctx, kept); err != nil {
		t.Fatal(err)
	}
	paused, orphan := airlock.NewID(), airlock.NewID()
	s := &airlock.Session{TenantID: tn.ID, Image: airlock.TemplateImagePrefix + paused, Size: airlock.SizeSmall,
		Limits: airlock.SessionLimits{CPUs: 1, MemoryBytes: 1 << 30, TimeoutS: 600}, Network: airlock.NetworkPolicy{Mode: airlock.NetworkNone},
		ExpiresAt: time.Now().Add(time.Hour), LastActiveAt: time.Now()}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, st := range []airlock.SessionState{airlock.SessionReady, airlock.SessionPaused} {
		s.State = st
		if err := db.UpdateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	dir := filepath.Join(state, "templates")
	layer := func(hex string, age time.Duration) string {
		p := filepath.Join(dir, "layers", "sha256", hex)
		write(t, p, 1000)
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	listed := layer("aaaa", 2*time.Hour)
	unlisted := layer("bbbb", 2*time.Hour)
	fresh := layer("cccc", 0)
	for _, id := range []string{kept.ID, paused, orphan} {
		write(t, filepath.Join(dir, id, "rootfs", "bin", "tool"), 2000)
		meta, _ := json.Marshal(map[string]any{"template_id": id, "layers": []string{"sha256:aaaa"}})
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snaps := filepath.Join(state, "snapshots")
	keptSnap := filepath.Join(snaps, airlock.TemplateImagePrefix+kept.ID+"-agent-0123456789ab")
	orphanSnap := filepath.Join(snaps, airlock.TemplateImagePrefix+orphan+"-agent-0123456789ab")
	baseSnap := filepath.Join(snaps, "python-ds-python-0123456789ab")
	for _, d := range []string{keptSnap, orphanSnap, baseSnap} {
		write(t, filepath.Join(d, "checkpoint.img"), 500)
	}

	cfg := template.CollectConfig{StateDir: state, Store: db, SnapshotDir: snaps, DryRun: true}
	dry, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, orphan), orphanSnap, unlisted}
	if got := dry.Removed(); !slices.Equal(got, want) {
		t.Fatalf("dry run would remove %v, want %v", got, want)
	}
	if dry.FreedBytes < 2000+500+1000 {
		t.Fatalf("dry run frees %d bytes, want at least 3500", dry.FreedBytes)
	}
	for _, p := range want {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the dry run removed %s", p)
		}
	}
	cfg.DryRun = false
	got, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Removed(), want) {
		t.Fatalf("removed %v, want %v", got.Removed(), want)
	}
	for _, p := range want {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is still there (%v)", p, err)
		}
	}
	for _, p := range []string{filepath.Join(dir, kept.ID, "rootfs", "bin", "tool"), filepath.Join(dir, paused, "rootfs", "bin", "tool"), keptSnap, baseSnap, listed, fresh} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("a referenced %s was removed: %v", p, err)
		}
	}

	// While a build runs, no layer goes (a pull caches its layers before
	// its template lists them).
	os.Chtimes(fresh, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour))
	cfg.Building = func() bool { return true }
	if got, err := template.Collect(ctx, cfg); err != nil || len(got.Layers) != 0 {
		t.Fatalf("collect during a build removed layers %v (%v)", got.Layers, err)
	}
	cfg.Building = nil
	if got, err := template.Collect(ctx, cfg); err != nil || !slices.Equal(got.Layers, []string{fresh}) {
		t.Fatalf("collect after the build removed %v (%v), want %s", got.Layers, err, fresh)
	}
}

func write(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}
