package template_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestCollectBuildCache builds, in a temporary state directory with a
// real SQLite store, what Dockerfile builds leave: step layers and
// results of the Dockerfile builder's cache and registry images pulled
// for FROM. A ready template lists some of them (its template.json), a
// build in progress claims others (a pin, as the builder takes one),
// one is unclaimed but used a moment ago, and the rest are unclaimed and
// idle for longer than the grace period. A dry run lists only the last
// (and removes nothing); a real run frees them; the claimed and fresh
// ones stay; once the build's pin is released, its entries go too.
func TestCollectBuildCache(t *testing.T) {
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
	dir := filepath.Join(state, "templates")
	old := time.Now().Add(-48 * time.Hour)
	entry := func(kind, name string, age time.Time) string {
		p := filepath.Join(dir, "dockerfile", kind, name)
		meta := map[string]string{"layers": "layer.json", "rootfs": "rootfs.json"}[kind]
		write(t, filepath.Join(p, "diff", "file"), 3000)
		write(t, filepath.Join(p, meta), 10)
		if err := os.Chtimes(filepath.Join(p, meta), age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fromImage := func(hexChar string, age time.Time) string {
		p := filepath.Join(dir, "from", strings.Repeat(hexChar, 64))
		write(t, filepath.Join(p, "rootfs", "bin", "tool"), 5000)
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	listedLayer, listedRootfs, listedFrom := entry("layers", "a1", old), entry("rootfs", "a2", old), fromImage("a", old)
	pinnedLayer, pinnedFrom := entry("layers", "b1", old), fromImage("b", old)
	freshLayer := entry("layers", "c1", time.Now())
	idleLayer, idleRootfs, idleFrom := entry("layers", "d1", old), entry("rootfs", "d2", old), fromImage("d", old)

	// A ready template lists what its build used.
	kept := &airlock.Template{Name: "kept", TenantID: tn.ID, Status: airlock.TemplateReady, Source: airlock.TemplateFromDockerfile}
	if err := db.CreateTemplate(ctx, kept); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, kept.ID, "rootfs", "bin", "tool"), 100)
	meta, _ := json.Marshal(map[string]any{"template_id": kept.ID, "build_cache": []string{listedFrom, listedLayer, listedRootfs}})
	if err := os.WriteFile(filepath.Join(dir, kept.ID, "template.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	// A build in progress claims its entries.
	pin, err := template.NewPin(template.PinsDir(filepath.Join(dir, "dockerfile")))
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release()
	if err := pin.Add(pinnedFrom, pinnedLayer); err != nil {
		t.Fatal(err)
	}

	cfg := template.CollectConfig{StateDir: state, Store: db, DryRun: true}
	dry, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantCache, wantFrom := []string{idleLayer, idleRootfs}, []string{idleFrom}
	if !slices.Equal(dry.BuildCache, wantCache) || !slices.Equal(dry.FromImages, wantFrom) || len(dry.Templates)+len(dry.Layers) != 0 {
		t.Fatalf("dry run would remove cache %v and images %v (and %v), want %v and %v", dry.BuildCache, dry.FromImages, dry.Removed(), wantCache, wantFrom)
	}
	if dry.FreedBytes < 3000+3000+5000 {
		t.Errorf("dry run frees %d bytes, want at least 11000", dry.FreedBytes)
	}
	all := []string{listedLayer, listedRootfs, listedFrom, pinnedLayer, pinnedFrom, freshLayer, idleLayer, idleRootfs, idleFrom}
	for _, p := range all {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the dry run removed %s", p)
		}
	}

	cfg.DryRun = false
	got, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Removed(), append(wantCache, wantFrom...)) || got.FreedBytes != dry.FreedBytes {
		t.Fatalf("removed %v (%d bytes), want %v (%d bytes)", got.Removed(), got.FreedBytes, append(wantCache, wantFrom...), dry.FreedBytes)
	}
	for _, p := range all {
		_, err := os.Stat(p)
		gone := slices.Contains(got.Removed(), p)
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, stat %v", p, gone, err)
		}
	}

	// The build ended: what it claimed goes, what the template lists
	// stays.
	pin.Release()
	got, err = template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.BuildCache, []string{pinnedLayer}) || !slices.Equal(got.FromImages, []string{pinnedFrom}) {
		t.Fatalf("after the build: removed %v and %v, want %s and %s", got.BuildCache, got.FromImages, pinnedLayer, pinnedFrom)
	}
	for _, p := range []string{listedLayer, listedRootfs, listedFrom, freshLayer} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
