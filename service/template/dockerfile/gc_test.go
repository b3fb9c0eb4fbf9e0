package dockerfile_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/service/template"
	"github.com/airlockhq/airlock/service/template/dockerfile"
	"github.com/airlockhq/airlock/store/sqlite"
)

// heldLog is a build log that holds the build at the first line holding
// mark until release is closed.
type heldLog struct {
	syncBuffer
	mark    string
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (l *heldLog) Write(p []byte) (int, error) {
	n, err := l.syncBuffer.Write(p)
	if strings.Contains(string(p), l.mark) {
		l.once.Do(func() {
			close(l.reached)
			<-l.release
		})
	}
	return n, err
}

// cacheEntries are the entries of uses in the builder's cache dir.
func cacheEntries(cacheDir string, uses []string) []string {
	var out []string
	for _, p := range uses {
		if strings.HasPrefix(p, cacheDir+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// age makes cache entries look unused for two days.
func age(t *testing.T, entries []string) {
	t.Helper()
	at := time.Now().Add(-48 * time.Hour)
	for _, p := range entries {
		meta := filepath.Join(p, "layer.json")
		if filepath.Base(filepath.Dir(p)) == "rootfs" {
			meta = filepath.Join(p, "rootfs.json")
		}
		if err := os.Chtimes(meta, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectKeepsARunningBuildsCache: the template garbage collector
// (as the server's and `airlock node image prune` run it) removes the
// step cache of an earlier build that nothing lists and that was idle
// past the grace period, but not the entries of a build in progress,
// even when they look as idle; once that build has ended and its entries
// are idle, they go too.
func TestCollectKeepsARunningBuildsCache(t *testing.T) {
	state, err := os.MkdirTemp(testenv.StateDir(), "gc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cacheDir := filepath.Join(state, "templates", "dockerfile")
	b := newBuilderWith(t, func(c *dockerfile.Config) { c.Dir = cacheDir })
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(state, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	earlier, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte("FROM base\nWORKDIR /earlier\n")})
	if err != nil {
		t.Fatal(err)
	}
	earlierEntries := cacheEntries(cacheDir, earlier.Uses)
	if len(earlierEntries) != 2 {
		t.Fatalf("the earlier build used %v, want a layer and a result", earlier.Uses)
	}
	age(t, earlierEntries)

	// A build held after its first step.
	log := &heldLog{mark: "#3/3", reached: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(log.release) }) }
	t.Cleanup(release)
	type outcome struct {
		res *dockerfile.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte("FROM base\nWORKDIR /running\nWORKDIR /held\n"), Log: log})
		done <- outcome{res, err}
	}()
	select {
	case <-log.reached:
	case o := <-done:
		t.Fatalf("the build ended before it was held: %v\n%s", o.err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the build did not reach its second step:\n%s", log.String())
	}
	var running []string
	ents, err := os.ReadDir(filepath.Join(cacheDir, "layers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if p := filepath.Join(cacheDir, "layers", e.Name()); !slices.Contains(earlierEntries, p) {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		t.Fatalf("layers of the running build: %v, want one", running)
	}
	age(t, running) // as idle as the earlier build's: only its pin keeps it

	cfg := template.CollectConfig{StateDir: state, Store: db, DryRun: true}
	dry, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(dry.BuildCache)); !slices.Equal(got, earlierEntries) {
		t.Fatalf("dry run lists %v, want the earlier build's %v", got, earlierEntries)
	}
	for _, p := range append(earlierEntries, running...) {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the dry run removed %s", p)
		}
	}
	cfg.DryRun = false
	got, err := template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if removed := slices.Sorted(slices.Values(got.BuildCache)); !slices.Equal(removed, earlierEntries) || got.FreedBytes <= 0 {
		t.Fatalf("removed %v (%d bytes), want %v", removed, got.FreedBytes, earlierEntries)
	}
	for _, p := range earlierEntries {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(running[0], "layer.json")); err != nil {
		t.Fatalf("the running build's layer was removed: %v", err)
	}

	release()
	o := <-done
	if o.err != nil {
		t.Fatalf("the held build: %v\n%s", o.err, log.String())
	}
	if !slices.Contains(o.res.Uses, running[0]) {
		t.Errorf("the build's uses %v lack its first layer %s", o.res.Uses, running[0])
	}
	for _, d := range []string{"running", "held"} {
		if fi, err := os.Stat(filepath.Join(o.res.Rootfs, d)); err != nil || !fi.IsDir() {
			t.Errorf("/%s in the result: %v", d, err)
		}
	}
	// Ended, and idle: nothing keeps its entries.
	entries := cacheEntries(cacheDir, o.res.Uses)
	age(t, entries)
	got, err = template.Collect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if removed := slices.Sorted(slices.Values(got.BuildCache)); !slices.Equal(removed, entries) {
		t.Fatalf("after the build removed %v, want %v", removed, entries)
	}
}
