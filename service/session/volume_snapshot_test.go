package session_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// volumeFiles writes into a volume mounted at DIR what the snapshot
// tests compare: text, a nested tree, a symlink, modes, an empty
// directory and 300 KB of random bytes.
const volumeFiles = `set -e; cd DIR
echo hello-volume > greeting
mkdir -p d/e/f empty && echo deep > d/e/f/file
printf '#!/bin/sh\necho run\n' > run.sh && chmod 755 run.sh
echo private > private && chmod 600 private
ln -s d/e/f/file link
head -c 300000 /dev/urandom > random
sync`

// listing prints what the volume holds (names, types, modes,
// owners, sizes, link targets, and the hash of every file) at DIR,
// for two volumes to be compared.
const listing = `cd DIR && find . -path ./lost+found -prune -o -print | LC_ALL=C sort | while read -r p; do
  stat -c '%n %F %a %u %s' "$p"; [ -L "$p" ] && readlink "$p"; [ -f "$p" ] && [ ! -L "$p" ] && sha256sum "$p"; done; true`

// Volume snapshots end to end on gVisor: a snapshot is a consistent copy
// (refused while a session writes the volume, taken beside a reader),
// sealed at rest; a new volume made from it holds the same files after
// the volume changed; it is its tenant's alone; it counts against the
// snapshot quota; a changed blob is refused and no volume is made; a
// deleted snapshot is gone with its blob.
func TestVolumeSnapshots(t *testing.T) {
	s := newStackWith(t, teststack.Options{Node: func(c *node.Config) { c.Keep.SnapshotQuotaMiB = 1 }})
	ctx := ctxFor(t, 10*time.Minute)
	a, b := s.a.c, s.b.c
	if _, err := a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 32}); err != nil {
		t.Fatal(err)
	}
	w := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	if e := s.shell(s.a, w.ID, strings.ReplaceAll(volumeFiles, "DIR", "/mnt")); e.ExitCode != 0 {
		t.Fatalf("write: exit %d: %s", e.ExitCode, e.Stderr)
	}
	want := s.shell(s.a, w.ID, strings.ReplaceAll(listing, "DIR", "/mnt")).Stdout
	if !strings.Contains(want, "./random regular file ") || !strings.Contains(want, " 1000 300000\n") || !strings.Contains(want, "d/e/f/file\n") {
		t.Fatalf("the listing does not show the files: %s", want)
	}

	// While a session writes it: 409, nothing stored.
	_, err := a.CreateVolumeSnapshot(ctx, "data", airlock.CreateVolumeSnapshotRequest{})
	wantProblem(t, "snapshot beside a writer", err, http.StatusConflict, "volume-busy")
	if l, err := a.ListVolumeSnapshots(ctx, "data"); err != nil || len(l) != 0 {
		t.Fatalf("snapshots after a refused one: %+v %v", l, err)
	}
	if _, err := a.DeleteSession(ctx, w.ID); err != nil {
		t.Fatal(err)
	}

	// Beside a reader: taken.
	r := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/srv", ReadOnly: true}}})
	start := time.Now()
	snap, err := a.CreateVolumeSnapshot(ctx, "data", airlock.CreateVolumeSnapshotRequest{Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of %d entries, %d sealed bytes: %v", snap.Entries, snap.Bytes, time.Since(start).Round(time.Millisecond))
	if snap.Volume != "data" || snap.Name != "first" || snap.SizeMiB != 32 || snap.TenantID != s.a.tenant.ID ||
		snap.Entries < 10 || snap.Bytes < 300000 || len(snap.SHA256) != 64 {
		t.Errorf("snapshot %+v", snap)
	}
	// The reader still reads; a writer asking now is fine again.
	if e := s.shell(s.a, r.ID, "cat /srv/greeting"); e.Stdout != "hello-volume\n" {
		t.Errorf("reader after the snapshot: %q %q", e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, r.ID); err != nil {
		t.Fatal(err)
	}

	// Sealed at rest: nothing of the files in the clear.
	blob := volumeBlobFile(t, s, snap.ID)
	sealed, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(sealed)) != snap.Bytes || !bytes.HasPrefix(sealed, []byte("ALKSEAL2")) ||
		bytes.Contains(sealed, []byte("hello-volume")) || bytes.Contains(sealed, []byte("greeting")) {
		t.Errorf("the blob (%d bytes, %q...) is not a sealed stream of the snapshot", len(sealed), sealed[:min(len(sealed), 8)])
	}

	// Another tenant: nothing of it, and a revoked key is refused (see
	// TestVolumesAuth).
	_, err = b.ListVolumeSnapshots(ctx, "data")
	wantProblem(t, "b lists a's volume's snapshots", err, http.StatusNotFound, "volume-not-found")
	wantProblem(t, "b deletes a's snapshot", b.DeleteVolumeSnapshot(ctx, "data", snap.ID), http.StatusNotFound, "volume-snapshot-not-found")
	_, err = b.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "stolen", FromSnapshot: snap.ID})
	wantProblem(t, "b restores a's snapshot", err, http.StatusNotFound, "volume-snapshot-not-found")
	_, err = b.CreateVolumeSnapshot(ctx, "data", airlock.CreateVolumeSnapshotRequest{})
	wantProblem(t, "b snapshots a's volume", err, http.StatusNotFound, "volume-not-found")

	// Change the volume, then restore the snapshot into a new one.
	c := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	if e := s.shell(s.a, c.ID, "echo changed > /mnt/greeting && rm -r /mnt/d /mnt/random && touch /mnt/new && sync"); e.ExitCode != 0 {
		t.Fatalf("change: %s", e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	copyVol, err := a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "copy", FromSnapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a %d MiB volume made from it: %v", copyVol.SizeMiB, time.Since(start).Round(time.Millisecond))
	if copyVol.SizeMiB != 32 {
		t.Errorf("a volume from a snapshot without a size has %d MiB, want the snapshot's 32", copyVol.SizeMiB)
	}
	n := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{
		{Name: "copy", Path: "/mnt"}, {Name: "data", Path: "/srv", ReadOnly: true}}})
	if got := s.shell(s.a, n.ID, strings.ReplaceAll(listing, "DIR", "/mnt")).Stdout; got != want {
		t.Errorf("the restored volume differs:\n%s\nwant\n%s", got, want)
	}
	if e := s.shell(s.a, n.ID, "cat /srv/greeting; ls /srv/new; /mnt/run.sh; echo more > /mnt/greeting && cat /mnt/greeting"); e.Stdout != "changed\n/srv/new\nrun\nmore\n" {
		t.Errorf("the changed volume, or the restored one's use: %q %q", e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, n.ID); err != nil {
		t.Fatal(err)
	}

	// The snapshot quota (1 MiB here) holds volume snapshots too.
	q := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	s.shell(s.a, q.ID, "head -c 900000 /dev/urandom > /mnt/big && sync")
	if _, err := a.DeleteSession(ctx, q.ID); err != nil {
		t.Fatal(err)
	}
	_, err = a.CreateVolumeSnapshot(ctx, "data", airlock.CreateVolumeSnapshotRequest{})
	wantProblem(t, "over the snapshot quota", err, http.StatusTooManyRequests, "snapshot-quota")
	if l, err := a.ListVolumeSnapshots(ctx, "data"); err != nil || len(l) != 1 || l[0].ID != snap.ID {
		t.Errorf("snapshots after one over the quota: %+v %v", l, err)
	}

	// A changed blob: refused, and no volume is made.
	for i, tamper := range []func([]byte) []byte{
		func(d []byte) []byte { d[len(d)/2] ^= 0x01; return d },
		func(d []byte) []byte { d[len(d)-1] ^= 0x80; return d },
		func(d []byte) []byte { return d[:len(d)-100] },
	} {
		if err := os.WriteFile(blob, tamper(append([]byte{}, sealed...)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "bad", FromSnapshot: snap.ID})
		wantProblem(t, "a changed blob", err, http.StatusUnprocessableEntity, "snapshot-damaged")
		_, err = a.Volume(ctx, "bad")
		wantProblem(t, fmt.Sprintf("tamper %d: the volume", i), err, http.StatusNotFound, "volume-not-found")
	}
	if err := os.WriteFile(blob, sealed, 0o600); err != nil {
		t.Fatal(err)
	}

	// Delete: another volume's name is not found; then gone, blob too.
	wantProblem(t, "delete under another volume", a.DeleteVolumeSnapshot(ctx, "copy", snap.ID), http.StatusNotFound, "volume-snapshot-not-found")
	if err := a.DeleteVolumeSnapshot(ctx, "data", snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blob); !os.IsNotExist(err) {
		t.Errorf("the deleted snapshot's blob: %v", err)
	}
	_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "late", FromSnapshot: snap.ID})
	wantProblem(t, "restore a deleted snapshot", err, http.StatusNotFound, "volume-snapshot-not-found")
	for _, v := range []string{"data", "copy"} {
		if err := a.DeleteVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	s.checkClean()
}

// volumeBlobFile is the file that holds a volume snapshot's blob.
func volumeBlobFile(t *testing.T, s *stack, id string) string {
	t.Helper()
	var found string
	filepath.Walk(s.BlobDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) == id && strings.Contains(p, "volume-snapshots") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no blob file for volume snapshot %s under %s", id, s.BlobDir)
	}
	return found
}
