package volume_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/internal/loopdisk"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/service/volume"
	"github.com/airlockhq/airlock/store/sqlite"
)

// gatedBlobs holds every Put until gate is closed, so a test can act
// while a snapshot is being taken.
type gatedBlobs struct {
	airlock.Blobs
	putting chan struct{} // receives when a Put starts
	gate    chan struct{}
}

func (g *gatedBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	g.putting <- struct{}{}
	<-g.gate
	return g.Blobs.Put(ctx, key, r)
}

func problemType(err error) string {
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return ae.Type
	}
	return ""
}

// While a snapshot is being taken no session may claim the volume to
// write it (readers may), nor delete it; once it is taken a writer may;
// a snapshot is refused while a writer holds the volume; a volume made
// from the snapshot holds its files, and no mount is left behind.
func TestSnapshotKeepsWritersOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc, db, tenant, blobs := newService(t)
	if _, err := svc.CreateVolume(ctx, tenant, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	// A writer puts a file in, through the volume's host mount.
	vs, err := svc.Attach(ctx, tenant.ID, "w1", []airlock.VolumeMount{{Name: "data", Path: "/mnt"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vs[0].HostDir, "f"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = svc.CreateVolumeSnapshot(ctx, tenant, "data", airlock.CreateVolumeSnapshotRequest{})
	if problemType(err) != "volume-busy" {
		t.Fatalf("a snapshot beside a writer: %v, want volume-busy", err)
	}
	if err := svc.Detach(ctx, "w1"); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	var snap *airlock.VolumeSnapshot
	go func() {
		var err error
		snap, err = svc.CreateVolumeSnapshot(ctx, tenant, "data", airlock.CreateVolumeSnapshotRequest{Name: "x"})
		done <- err
	}()
	<-blobs.putting // the snapshot is under way
	_, err = svc.Attach(ctx, tenant.ID, "w2", []airlock.VolumeMount{{Name: "data", Path: "/mnt"}})
	if problemType(err) != "volume-busy" {
		t.Errorf("a writer during a snapshot: %v, want volume-busy", err)
	}
	if v, err := db.Volume(ctx, tenant.ID, "data"); err != nil || len(v.Mounts) != 0 {
		t.Errorf("the refused writer's claim: %+v %v", v, err)
	}
	if _, err := svc.Attach(ctx, tenant.ID, "r1", []airlock.VolumeMount{{Name: "data", Path: "/srv", ReadOnly: true}}); err != nil {
		t.Errorf("a reader during a snapshot: %v", err)
	}
	if err := svc.DeleteVolume(ctx, tenant, "data"); problemType(err) != "volume-in-use" {
		t.Errorf("delete during a snapshot: %v, want volume-in-use", err)
	}
	close(blobs.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := svc.Detach(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	// Taken: a writer may have the volume again.
	vs, err = svc.Attach(ctx, tenant.ID, "w3", []airlock.VolumeMount{{Name: "data", Path: "/mnt"}})
	if err != nil {
		t.Fatalf("a writer after the snapshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(vs[0].HostDir, "f"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := svc.Detach(ctx, "w3"); err != nil {
		t.Fatal(err)
	}

	// The copy holds what the volume held when the snapshot was taken,
	// owned by the sandbox user.
	if _, err := svc.CreateVolume(ctx, tenant, airlock.CreateVolumeRequest{Name: "copy", FromSnapshot: snap.ID}); err != nil {
		t.Fatal(err)
	}
	vs, err = svc.Attach(ctx, tenant.ID, "r2", []airlock.VolumeMount{{Name: "copy", Path: "/mnt", ReadOnly: true}, {Name: "data", Path: "/srv", ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"one", "two"} {
		b, err := os.ReadFile(filepath.Join(vs[i].HostDir, "f"))
		if err != nil || string(b) != want {
			t.Errorf("volume %d holds %q %v, want %q", i, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(vs[0].HostDir, "f")); err != nil {
		t.Error(err)
	} else if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 1000 {
		t.Errorf("the restored file belongs to uid %d, not the sandbox user's 1000", uid)
	}
	if err := svc.Detach(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data", "copy"} {
		if err := svc.DeleteVolume(ctx, tenant, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.DeleteVolumeSnapshot(ctx, tenant, "data", snap.ID); err != nil {
		t.Fatal(err)
	}
}

// newService is a volume service on a fresh SQLite store, with a
// tenant, snapshots sealed under a new master key into a blob directory
// behind a gate (open unless the test takes it); when the test ends it
// fails if a mount is left.
func newService(t testing.TB) (*volume.Service, *sqlite.DB, *airlock.Tenant, *gatedBlobs) {
	t.Helper()
	testenv.RequireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tenant := &airlock.Tenant{Name: "acme"}
	if err := db.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	mk, _ := seal.GenerateMasterKey()
	keys, err := seal.NewKeys(db, mk)
	if err != nil {
		t.Fatal(err)
	}
	blobDir, err := disk.New(disk.Config{Dir: filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	blobs := &gatedBlobs{Blobs: blobDir, putting: make(chan struct{}, 1), gate: make(chan struct{})}
	svc, err := volume.New(volume.Config{Store: db, Dir: filepath.Join(dir, "volumes"),
		Snapshots: volume.SnapshotConfig{Keys: keys, Blobs: blobs, Used: db.SnapshotBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ms, _ := loopdisk.MountsUnder(dir); len(ms) > 0 {
			t.Errorf("mounts left: %v", ms)
			loopdisk.UnmountAll(dir)
		}
	})
	return svc, db, tenant, blobs
}

// BenchmarkSnapshotRestore: a snapshot of a volume holding 64 MiB of
// random bytes in 16 files, and a new volume made from it.
func BenchmarkSnapshotRestore(b *testing.B) {
	ctx := context.Background()
	svc, _, tenant, blobs := newService(b)
	close(blobs.gate)
	blobs.putting = make(chan struct{}, b.N+1)
	if _, err := svc.CreateVolume(ctx, tenant, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 128}); err != nil {
		b.Fatal(err)
	}
	vs, err := svc.Attach(ctx, tenant.ID, "w", []airlock.VolumeMount{{Name: "data", Path: "/mnt"}})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for i := range 16 {
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(vs[0].HostDir, fmt.Sprintf("f%d", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := svc.Detach(ctx, "w"); err != nil {
		b.Fatal(err)
	}
	var snapTime, restoreTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		snap, err := svc.CreateVolumeSnapshot(ctx, tenant, "data", airlock.CreateVolumeSnapshotRequest{})
		if err != nil {
			b.Fatal(err)
		}
		snapTime += time.Since(start)
		start = time.Now()
		name := fmt.Sprintf("copy%d", i)
		if _, err := svc.CreateVolume(ctx, tenant, airlock.CreateVolumeRequest{Name: name, FromSnapshot: snap.ID}); err != nil {
			b.Fatal(err)
		}
		restoreTime += time.Since(start)
		b.StopTimer()
		if err := svc.DeleteVolume(ctx, tenant, name); err != nil {
			b.Fatal(err)
		}
		if err := svc.DeleteVolumeSnapshot(ctx, tenant, "data", snap.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(snapTime.Milliseconds())/float64(b.N), "snapshot-ms")
	b.ReportMetric(float64(restoreTime.Milliseconds())/float64(b.N), "restore-ms")
	if err := svc.DeleteVolume(ctx, tenant, "data"); err != nil {
		b.Fatal(err)
	}
}
