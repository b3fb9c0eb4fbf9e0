package image_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/service/image"
)

// fakeImage writes a finished image version of name into stateDir: a
// manifest and a rootfs holding one file of size bytes; it returns the
// version's directory.
func fakeImage(t *testing.T, stateDir, name, hash string, built time.Time, size int) string {
	t.Helper()
	dir := filepath.Join(stateDir, "images", name+"-"+image.Short(hash))
	if err := os.MkdirAll(filepath.Join(dir, "rootfs", "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootfs", "usr", "bin", "tool"), make([]byte, size), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(image.Manifest{Name: name, Hash: hash, StageHash: "stage-" + hash[:4], BuiltAt: built})
	if err := os.WriteFile(filepath.Join(dir, image.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCollectKeepsWhatIsInUse: of three versions of one image, the
// current one (the newest: no agent is configured) and the one a
// sandbox's rootfs is in are kept, the third is removed; a dry run
// reports the same and removes nothing; the bytes freed count a file
// hard-linked from a kept version as nothing.
func TestCollectKeepsWhatIsInUse(t *testing.T) {
	state := t.TempDir()
	now := time.Now()
	old := fakeImage(t, state, "base", strings.Repeat("1", 64), now.Add(-2*time.Hour), 3000)
	used := fakeImage(t, state, "base", strings.Repeat("2", 64), now.Add(-time.Hour), 5000)
	current := fakeImage(t, state, "base", strings.Repeat("3", 64), now, 7000)
	// A file the old version shares with the current one (images share
	// their stage's files by hard links): removing old frees it not.
	if err := os.Link(filepath.Join(current, "rootfs", "usr", "bin", "tool"), filepath.Join(old, "rootfs", "shared")); err != nil {
		t.Fatal(err)
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inUse := []string{filepath.Join(used, "rootfs")}
	freed := func(n int64) bool { return n >= 3000 && n < 3000+1024 }

	dry, err := st.Collect(ctx, image.CollectConfig{InUse: inUse, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// 3000 bytes of its own file and its manifest; not the shared file.
	if !slices.Equal(dry.Removed, []string{old}) || !freed(dry.FreedBytes) {
		t.Fatalf("dry run: %v, %d bytes; want [%s], 3000 and its manifest", dry.Removed, dry.FreedBytes, old)
	}
	for _, d := range []string{old, used, current} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("dry run removed %s", d)
		}
	}

	got, err := st.Collect(ctx, image.CollectConfig{InUse: inUse})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Removed, []string{old}) || got.FreedBytes != dry.FreedBytes {
		t.Fatalf("collect: %v, %d bytes; want [%s], %d", got.Removed, got.FreedBytes, old, dry.FreedBytes)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the unreferenced version is still there: %v", err)
	}
	for _, d := range []string{used, current} {
		if _, err := os.Stat(filepath.Join(d, "rootfs", "usr", "bin", "tool")); err != nil {
			t.Fatalf("a kept version lost its files: %v", err)
		}
	}
	// Once nothing uses it, the older version goes too.
	got, err = st.Collect(ctx, image.CollectConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Removed, []string{used}) {
		t.Fatalf("second collect removed %v, want [%s]", got.Removed, used)
	}
	imgs, err := st.List(ctx)
	if err != nil || len(imgs) != 1 || filepath.Dir(imgs[0].Rootfs) != current {
		t.Fatalf("images left: %+v, %v; want the current one", imgs, err)
	}
}

// TestCollectKeepsShippedStages: the debootstrap stage of a shipped spec
// is kept although no image of it is built on the node (its next build
// starts from it), while a stage of no shipped spec and no kept image
// goes.
func TestCollectKeepsShippedStages(t *testing.T) {
	state := t.TempDir()
	stage := func(hash string) string {
		dir := filepath.Join(state, "images", "stages", hash)
		if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	var shipped []string
	for _, spec := range image.Specs() {
		shipped = append(shipped, stage(image.StageHash(spec)))
	}
	stray := stage(strings.Repeat("9", 64))
	st, err := image.NewStore(image.StoreConfig{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Collect(context.Background(), image.CollectConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Removed, []string{stray}) {
		t.Fatalf("collect removed %v, want only the stray stage %s", got.Removed, stray)
	}
	for _, d := range shipped {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("a shipped spec's stage was removed: %v", err)
		}
	}
}
