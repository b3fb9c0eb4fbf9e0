package session_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/quota"
)

// Volumes end to end on gVisor: what one session writes the next reads;
// one writer at a time, readers beside it; the size is a real limit
// (ENOSPC inside the sandbox); the tenant's volume_bytes quota; another
// tenant can neither see, mount nor delete a volume; a mounted volume
// cannot be deleted; ended sessions release their claims.
func TestVolumes(t *testing.T) {
	s := newStackWith(t, teststack.Options{Quotas: quota.Limits{quota.VolumeBytes: 100 << 20}})
	ctx := ctxFor(t, 10*time.Minute)
	a, b := s.a.c, s.b.c

	v, err := a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 32})
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "data" || v.SizeMiB != 32 || v.TenantID != s.a.tenant.ID || len(v.Mounts) != 0 {
		t.Fatalf("created %+v", v)
	}
	_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 16})
	wantProblem(t, "same name again", err, http.StatusConflict, "volume-exists")
	_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "big", SizeMiB: 80})
	wantProblem(t, "over the tenant's quota", err, http.StatusTooManyRequests, "volume-quota")
	_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "Bad/Name", SizeMiB: 16})
	wantProblem(t, "bad name", err, http.StatusBadRequest, "invalid-volume-name")
	_, err = a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "tiny", SizeMiB: 1})
	wantProblem(t, "too small", err, http.StatusBadRequest, "invalid-volume-size")

	// The quota's use shows in GET /v1/usage.
	u, err := a.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range u.Quotas {
		if q.Quota == "volume_bytes" {
			found = true
			if q.Used != 32<<20 || q.Limit != 100<<20 {
				t.Errorf("volume_bytes usage %+v, want 32 MiB of 100", q)
			}
		}
	}
	if !found {
		t.Error("GET /v1/usage lists no volume_bytes")
	}

	// Another tenant sees nothing of it.
	if l, err := b.ListVolumes(ctx); err != nil || len(l) != 0 {
		t.Errorf("tenant b lists %+v, %v", l, err)
	}
	_, err = b.Volume(ctx, "data")
	wantProblem(t, "b reads a's volume", err, http.StatusNotFound, "volume-not-found")
	wantProblem(t, "b deletes a's volume", b.DeleteVolume(ctx, "data"), http.StatusNotFound, "volume-not-found")
	_, _, err = b.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	wantProblem(t, "b mounts a's volume", err, http.StatusNotFound, "volume-not-found")

	// Paths are checked before anything is made.
	for _, p := range []string{"mnt/data", "/proc/x", "/dev", "/workspace", "/", "/mnt/../etc", "/run/airlock", "/opt/airlock/bin", "/mnt//x", "/mnt/x/"} {
		_, _, err = a.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Volumes: []airlock.VolumeMount{{Name: "data", Path: p}}})
		wantProblem(t, "path "+p, err, http.StatusBadRequest, "invalid-volume-path")
	}

	// A mount point the image lacks is refused (runsc would make it in
	// the image's root file system on the host, which every sandbox of
	// the image shares), and nothing is made in the image.
	_, _, err = a.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt/data"}}})
	wantProblem(t, "a mount point the image lacks", err, http.StatusBadRequest, "invalid-volume-path")
	if got, err := a.Volume(ctx, "data"); err != nil || len(got.Mounts) != 0 {
		t.Errorf("a refused session holds the volume: %+v %v", got, err)
	}

	// The writer writes and syncs; the file survives its session.
	w := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	if len(w.Volumes) != 1 || w.Volumes[0].Path != "/mnt" {
		t.Errorf("session volumes %+v", w.Volumes)
	}
	if e := s.shell(s.a, w.ID, "echo hello > /mnt/greeting && mkdir /mnt/d && echo deep > /mnt/d/f && sync"); e.ExitCode != 0 {
		t.Fatalf("write: exit %d: %s %s", e.ExitCode, e.Stdout, e.Stderr)
	}
	got, err := a.Volume(ctx, "data")
	if err != nil || len(got.Mounts) != 1 || got.Mounts[0].SessionID != w.ID || got.Mounts[0].ReadOnly {
		t.Fatalf("volume while mounted: %+v, %v", got, err)
	}

	// A second writer is refused; a reader beside the writer is fine and
	// sees what it wrote; the reader cannot write.
	_, _, err = a.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Volumes: []airlock.VolumeMount{{Name: "data", Path: "/workspace/d"}}})
	wantProblem(t, "second writer", err, http.StatusConflict, "volume-busy")
	r := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/srv", ReadOnly: true}}})
	if e := s.shell(s.a, r.ID, "cat /srv/greeting /srv/d/f"); e.ExitCode != 0 || e.Stdout != "hello\ndeep\n" {
		t.Errorf("reader: exit %d %q %q", e.ExitCode, e.Stdout, e.Stderr)
	}
	if e := s.shell(s.a, r.ID, "echo x > /srv/nope"); e.ExitCode == 0 || !strings.Contains(e.Stderr, "Read-only") {
		t.Errorf("reader wrote: exit %d %q", e.ExitCode, e.Stderr)
	}

	// A mounted volume cannot be deleted.
	wantProblem(t, "delete while mounted", a.DeleteVolume(ctx, "data"), http.StatusConflict, "volume-in-use")
	// Nor paused (its sandbox cannot be saved).
	_, err = a.PauseSession(ctx, w.ID)
	wantProblem(t, "pause with a volume", err, http.StatusConflict, "pause-unsupported")

	// The size is a real limit: writing past 32 MiB fails inside with
	// ENOSPC, and the session lives on.
	e := s.shell(s.a, w.ID, "dd if=/dev/zero of=/mnt/fill bs=1M count=64 2>&1; echo rc=$?")
	if !strings.Contains(e.Stdout, "No space left on device") || strings.Contains(e.Stdout, "rc=0") {
		t.Errorf("filling the volume: %q", e.Stdout)
	}
	if e := s.shell(s.a, w.ID, "rm /mnt/fill && sync && echo ok"); e.Stdout != "ok\n" {
		t.Errorf("after the fill: %q %q", e.Stdout, e.Stderr)
	}

	for _, id := range []string{w.ID, r.ID} {
		if _, err := a.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	got, err = a.Volume(ctx, "data")
	if err != nil || len(got.Mounts) != 0 {
		t.Fatalf("volume after its sessions ended: %+v, %v", got, err)
	}

	// The next writer finds the files.
	n := s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/workspace/data"}}})
	if e := s.shell(s.a, n.ID, "cat /workspace/data/greeting /workspace/data/d/f && echo more >> /workspace/data/greeting"); e.ExitCode != 0 || e.Stdout != "hello\ndeep\n" {
		t.Errorf("next session: exit %d %q %q", e.ExitCode, e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, n.ID); err != nil {
		t.Fatal(err)
	}

	// Deleted once unmounted; its name is free again, and the new volume
	// is empty.
	if err := a.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 80}); err != nil {
		t.Fatalf("recreate within the quota freed: %v", err)
	}
	n = s.create(s.a, airlock.CreateSessionRequest{Volumes: []airlock.VolumeMount{{Name: "data", Path: "/tmp/v/w"}}})
	if e := s.shell(s.a, n.ID, "ls -A /tmp/v/w | wc -l"); strings.TrimSpace(e.Stdout) != "0" {
		t.Errorf("a new volume of an old name holds %q", e.Stdout)
	}
	if _, err := a.DeleteSession(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	s.checkClean()
}

// A revoked key and no key are refused on every volume route.
func TestVolumesAuth(t *testing.T) {
	s := newStack(t, nil)
	if _, err := s.a.c.CreateVolume(ctxFor(t, time.Minute), airlock.CreateVolumeRequest{Name: "v", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.store.ListAPIKeys(ctxFor(t, time.Minute), airlock.KeyFilter{TenantID: s.b.tenant.ID})
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of b: %v, %v", keys, err)
	}
	if _, err := s.store.RevokeAPIKey(ctxFor(t, time.Minute), keys[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/v1/volumes", `{"name":"x","size_mib":16}`},
		{"GET", "/v1/volumes", ""},
		{"GET", "/v1/volumes/v", ""},
		{"DELETE", "/v1/volumes/v", ""},
		{"POST", "/v1/volumes/v/snapshots", `{}`},
		{"GET", "/v1/volumes/v/snapshots", ""},
		{"DELETE", "/v1/volumes/v/snapshots/x", ""},
		{"POST", "/v1/volumes", `{"name":"y","from_snapshot":"x"}`},
	} {
		for _, key := range []string{"", s.b.key} {
			code, _, body := s.raw(rt.method, rt.path, key, "application/json", strings.NewReader(rt.body))
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with key %v: %d %s", rt.method, rt.path, key != "", code, body)
			}
		}
	}
	code, _, body := s.raw("POST", "/v1/volumes", s.a.key, "application/json", strings.NewReader(`{"name":"x","size_mib":"big"}`))
	if code != http.StatusBadRequest {
		t.Errorf("bad body: %d %s", code, body)
	}
	code, _, body = s.raw("DELETE", "/v1/volumes/"+strings.Repeat("x", 300), s.a.key, "", nil)
	if code != http.StatusNotFound {
		t.Errorf("long name: %d %s", code, body)
	}
	// Snapshot routes: bad input is a problem, never a 500.
	for _, rt := range []struct {
		method, path, body string
		code               int
		slug               string
	}{
		{"POST", "/v1/volumes/v/snapshots", `{"name":"a\u0001b"}`, http.StatusBadRequest, "invalid-snapshot-name"},
		{"POST", "/v1/volumes/v/snapshots", `{"nope":1}`, http.StatusBadRequest, ""},
		{"POST", "/v1/volumes/" + strings.Repeat("x", 300) + "/snapshots", `{}`, http.StatusNotFound, "volume-not-found"},
		{"GET", "/v1/volumes/missing/snapshots", "", http.StatusNotFound, "volume-not-found"},
		{"DELETE", "/v1/volumes/v/snapshots/" + strings.Repeat("x", 300), "", http.StatusNotFound, "volume-snapshot-not-found"},
		{"DELETE", "/v1/volumes/v/snapshots/nosuch", "", http.StatusNotFound, "volume-snapshot-not-found"},
		{"POST", "/v1/volumes", `{"name":"y","from_snapshot":"../../etc"}`, http.StatusBadRequest, "invalid-volume-snapshot"},
		{"POST", "/v1/volumes", `{"name":"y","from_snapshot":"nosuch"}`, http.StatusNotFound, "volume-snapshot-not-found"},
		{"POST", "/v1/volumes", `{"name":"y","from_snapshot":"nosuch","size_mib":1}`, http.StatusBadRequest, "invalid-volume-size"},
	} {
		code, _, body := s.raw(rt.method, rt.path, s.a.key, "application/json", strings.NewReader(rt.body))
		if code != rt.code || !strings.Contains(string(body), rt.slug) {
			t.Errorf("%s %s %s: %d %s, want %d %s", rt.method, rt.path, rt.body, code, body, rt.code, rt.slug)
		}
	}
	if l, err := s.a.c.ListVolumeSnapshots(ctxFor(t, time.Minute), "v"); err != nil || len(l) != 0 {
		t.Errorf("snapshots of a new volume: %+v %v", l, err)
	}
}
