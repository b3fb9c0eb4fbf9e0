package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/mountinfo"
)

// TestVolumeSurvivesKill kills airlockd with SIGKILL while a session has
// a volume mounted read-write and another has it read-only, and a third
// session (ended in the store while no server runs) holds a second
// volume. After the restart: the writer's session lives with its volume
// and everything it had flushed, and writes on; the claim is still held
// (a second writer is 409); the ended session's claim was released, its
// volume unmounted and deletable. Once the sessions end, the next
// session finds every file, and the host holds no volume mount.
func TestVolumeSurvivesKill(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "volume-crash", images: []string{"base"}})
	args := n.args("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots")
	d := n.track(startDaemon(t, n.bin, args))
	key := n.key()
	c := newClient(t, d.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	for _, name := range []string{"data", "other"} {
		if _, err := c.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: name, SizeMiB: 32}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(vs ...airlock.VolumeMount) *airlock.Session {
		t.Helper()
		s, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600, Volumes: vs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sh := func(c *client.Client, id, line string) string {
		t.Helper()
		e, err := c.Exec(ctx, id, airlock.SessionExecRequest{Shell: line})
		if err != nil {
			t.Fatalf("exec %q: %v", line, err)
		}
		if e.ExitCode != 0 {
			t.Fatalf("exec %q: exit %d: %s", line, e.ExitCode, e.Stderr)
		}
		return e.Stdout
	}
	writer := mk(airlock.VolumeMount{Name: "data", Path: "/mnt"})
	reader := mk(airlock.VolumeMount{Name: "data", Path: "/srv", ReadOnly: true})
	orphan := mk(airlock.VolumeMount{Name: "other", Path: "/workspace/other"})
	sh(c, writer.ID, "seq 1 100000 > /mnt/before && sync /mnt/before && echo flushed > /mnt/flag && sync")
	sh(c, orphan.ID, "echo o > /workspace/other/o && sync")

	d.kill(t)
	endInStore(t, n.dir, orphan.ID)
	// The volumes stay mounted on the host for the sandboxes, which
	// outlive airlockd.
	if m := volumeMounts(t, n.dir); len(m) != 2 {
		t.Fatalf("host volume mounts while airlockd is down: %v", m)
	}

	d = n.track(startDaemon(t, n.bin, args))
	c = newClient(t, d.url, key)
	got, err := c.Session(ctx, writer.ID)
	if err != nil || !got.State.Live() || len(got.Volumes) != 1 || got.Volumes[0].Path != "/mnt" {
		t.Fatalf("writer after the restart: %+v %v", got, err)
	}
	if out := sh(c, writer.ID, "wc -l < /mnt/before; cat /mnt/flag"); out != "100000\nflushed\n" {
		t.Errorf("the writer's volume after the restart: %q", out)
	}
	sh(c, writer.ID, "echo after > /mnt/after && sync")
	if out := sh(c, reader.ID, "cat /srv/flag /srv/after"); out != "flushed\nafter\n" {
		t.Errorf("the reader after the restart: %q", out)
	}
	// The claim held through the crash.
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Volumes: []airlock.VolumeMount{{Name: "data", Path: "/tmp/d"}}})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.HasSuffix(ce.Type, "/volume-busy") {
		t.Errorf("a second writer after the restart: %v", err)
	}
	// The ended session's claim is gone, and with it the mount.
	v, err := c.Volume(ctx, "other")
	if err != nil || len(v.Mounts) != 0 {
		t.Errorf("volume other after the restart: %+v %v", v, err)
	}
	if m := volumeMounts(t, n.dir); len(m) != 1 {
		t.Errorf("host volume mounts after the restart: %v, want data's alone", m)
	}
	if err := c.DeleteVolume(ctx, "data"); err == nil {
		t.Error("a mounted volume was deleted after the restart")
	}

	for _, id := range []string{writer.ID, reader.ID} {
		if _, err := c.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if m := volumeMounts(t, n.dir); len(m) != 0 {
		t.Errorf("host volume mounts with no session: %v", m)
	}
	next := mk(airlock.VolumeMount{Name: "data", Path: "/workspace/data"}, airlock.VolumeMount{Name: "other", Path: "/tmp/other"})
	if out := sh(c, next.ID, "wc -l < /workspace/data/before; cat /workspace/data/flag /workspace/data/after /tmp/other/o"); out != "100000\nflushed\nafter\no\n" {
		t.Errorf("the next session's volumes: %q", out)
	}
	if _, err := c.DeleteSession(ctx, next.ID); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data", "other"} {
		if err := c.DeleteVolume(ctx, name); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	if m := volumeMounts(t, n.dir); len(m) != 0 {
		t.Errorf("host volume mounts at the end: %v", m)
	}
}

// volumeMounts lists the host mounts under the node's volumes.
func volumeMounts(t *testing.T, stateDir string) []string {
	t.Helper()
	ms, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	return mountinfo.Under(ms, filepath.Join(stateDir, "volumes", "mnt"))
}
