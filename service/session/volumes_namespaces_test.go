package session_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/teststack"
)

// Volumes on the namespaces backend: what one session writes the next
// reads; the files are the sandbox user's inside (an idmapped mount of
// a sandbox whose user is a host uid of its own) and uid 1000 on the
// volume's disk, so a gVisor session reads and writes them too; a
// reader's mount is read-only; one writer
// at a time across both backends; nothing is left on the host.
func TestVolumesNamespaces(t *testing.T) {
	s := newStackWith(t, teststack.Options{Extra: []airlock.Backend{testenv.Namespaces(t)}})
	ctx := ctxFor(t, 10*time.Minute)
	if err := s.store.SetTenantFirstParty(context.Background(), s.a.tenant.ID, true); err != nil {
		t.Fatal(err)
	}
	a := s.a.c
	if _, err := a.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 32}); err != nil {
		t.Fatal(err)
	}
	ns := func(v ...airlock.VolumeMount) *airlock.Session {
		t.Helper()
		sess := s.create(s.a, airlock.CreateSessionRequest{Isolation: airlock.IsolationContainer, Volumes: v})
		if sess.Backend != "namespaces" {
			t.Fatalf("session on %s, want namespaces", sess.Backend)
		}
		return sess
	}

	// Below /workspace (a mount point the backend makes on the session's
	// disk) and at a directory of the image.
	w := ns(airlock.VolumeMount{Name: "data", Path: "/workspace/data"})
	if e := s.shell(s.a, w.ID, "cd /workspace/data && echo from-ns > greeting && mkdir d && echo deep > d/f && sync && id -u && stat -c '%u %U' . greeting d/f"); e.ExitCode != 0 ||
		e.Stdout != "1000\n1000 sandbox\n1000 sandbox\n1000 sandbox\n" {
		t.Fatalf("write on namespaces: exit %d %q %q", e.ExitCode, e.Stdout, e.Stderr)
	}
	// Only a reader beside the writer.
	_, _, err := a.CreateSession(ctx, airlock.CreateSessionRequest{Isolation: airlock.IsolationContainer, Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	wantProblem(t, "a second writer on namespaces", err, http.StatusConflict, "volume-busy")
	r := ns(airlock.VolumeMount{Name: "data", Path: "/srv", ReadOnly: true})
	if e := s.shell(s.a, r.ID, "cat /srv/greeting /srv/d/f; echo x > /srv/nope; true"); e.Stdout != "from-ns\ndeep\n" ||
		!strings.Contains(e.Stderr, "Read-only") {
		t.Errorf("reader on namespaces: %q %q", e.Stdout, e.Stderr)
	}
	for _, id := range []string{w.ID, r.ID} {
		if _, err := a.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// The next session, on namespaces at another path, finds the files.
	n := ns(airlock.VolumeMount{Name: "data", Path: "/mnt"})
	if e := s.shell(s.a, n.ID, "cat /mnt/greeting /mnt/d/f && echo again >> /mnt/greeting && sync"); e.Stdout != "from-ns\ndeep\n" {
		t.Errorf("next session on namespaces: %q %q", e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, n.ID); err != nil {
		t.Fatal(err)
	}

	// gVisor reads and writes the same files: the owners on the disk are
	// the same under either backend.
	g := s.create(s.a, airlock.CreateSessionRequest{Isolation: airlock.IsolationKernel, Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	if g.Backend != "gvisor" {
		t.Fatalf("kernel isolation on %s", g.Backend)
	}
	if e := s.shell(s.a, g.ID, "cat /mnt/greeting && stat -c %u /mnt/d/f && echo from-gvisor > /mnt/d/f && sync"); e.Stdout != "from-ns\nagain\n1000\n" {
		t.Errorf("gvisor reads what namespaces wrote: %q %q", e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	n = ns(airlock.VolumeMount{Name: "data", Path: "/tmp/v"})
	if e := s.shell(s.a, n.ID, "cat /tmp/v/d/f && echo ok > /tmp/v/d/f && cat /tmp/v/d/f"); e.Stdout != "from-gvisor\nok\n" {
		t.Errorf("namespaces reads and rewrites what gvisor wrote: %q %q", e.Stdout, e.Stderr)
	}
	if _, err := a.DeleteSession(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Volume(ctx, "data"); err != nil || len(v.Mounts) != 0 {
		t.Errorf("volume after its sessions: %+v %v", v, err)
	}
	if err := a.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	s.checkClean()
}
