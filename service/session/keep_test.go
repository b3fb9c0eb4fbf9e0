package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
)

// fillWorkspace writes what the keep tests check: a 100 MB file, a deep
// tree, files with several modes, symlinks and empty directories.
func (s *stack) fillWorkspace(tc tenantClient, id string) {
	s.t.Helper()
	deep := strings.Repeat("d/", 40)
	e := s.shell(tc, id, `set -e; cd /workspace
head -c 100000000 /dev/urandom > big.bin
mkdir -p `+deep+` empty/inner keepme
echo bottom > `+deep+`bottom.txt
printf 'secret' > private.txt; chmod 600 private.txt
printf '#!/bin/sh\necho run\n' > run.sh; chmod 755 run.sh
printf 'ro' > readonly.txt; chmod 444 readonly.txt
chmod 700 keepme; chmod 1777 empty
ln -s run.sh link-to-run
ln -s ../../big.bin d/d/up-link
ln -s nowhere dangling`)
	if e.ExitCode != 0 {
		s.t.Fatalf("fill: %d %s", e.ExitCode, e.Stderr)
	}
}

// manifest lists every entry of the workspace with its type, mode, size
// and link target, and every file's SHA-256.
func (s *stack) manifest(tc tenantClient, id string) string {
	s.t.Helper()
	e := s.shell(tc, id, `cd /workspace && find . -mindepth 1 -printf '%y %m %p -> %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum`)
	if e.ExitCode != 0 || e.StdoutTruncated {
		s.t.Fatalf("manifest: %d %s", e.ExitCode, e.Stderr)
	}
	return e.Stdout
}

// Files (a 100 MB one, a deep tree), modes and symlinks, and a Python
// context's variables survive five pauses and resumes byte for byte; the
// deadline moves by the paused time; a paused session refuses calls and
// holds no sandbox; a snapshot restored into a new session has the same
// workspace.
func TestPauseResumeFiveTimes(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 8*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 1800})
	s.fillWorkspace(s.a, sess.ID)
	want := s.manifest(s.a, sess.ID)
	if !strings.Contains(want, "l 777 ./link-to-run -> run.sh") || !strings.Contains(want, "d 1777 ./empty") {
		t.Fatalf("manifest lacks what was made:\n%s", want)
	}
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x = [i * i for i in range(10)]\nimport random\nr0 = random.random()"}); err != nil {
		t.Fatal(err)
	}
	expires := sess.ExpiresAt
	for i := 0; i < 5; i++ {
		p, err := c.PauseSession(ctx, sess.ID)
		if err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if p.State != airlock.SessionPaused || p.PausedAt == nil {
			t.Fatalf("pause %d: %+v", i, p)
		}
		if got, err := c.Session(ctx, sess.ID); err != nil || got.State != airlock.SessionPaused || got.PausedAt == nil {
			t.Fatalf("get paused %d: %+v %v", i, got, err)
		}
		_, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "true"})
		wantProblem(t, "exec while paused", err, 409, "session-paused")
		_, err = c.PauseSession(ctx, sess.ID)
		wantProblem(t, "pause while paused", err, 409, "session-paused")
		if n := s.Provisioner.Usage(s.a.tenant.ID); n.Sessions != 0 {
			t.Errorf("pause %d: the tenant still holds %d sessions' room", i, n.Sessions)
		}
		time.Sleep(1100 * time.Millisecond) // paused time, to see the deadline move (not a synchronisation)
		r, err := c.ResumeSession(ctx, sess.ID)
		if err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
		if r.State != airlock.SessionReady || r.PausedAt != nil {
			t.Fatalf("resume %d: %+v", i, r)
		}
		if !r.ExpiresAt.After(expires.Add(time.Second)) {
			t.Errorf("resume %d: expires %v, was %v: the paused time was counted", i, r.ExpiresAt, expires)
		}
		expires = r.ExpiresAt
		_, err = c.ResumeSession(ctx, sess.ID)
		wantProblem(t, "resume when not paused", err, 409, "session-not-paused")
		if got := s.manifest(s.a, sess.ID); got != want {
			t.Fatalf("after resume %d the workspace differs:\n%s\nwant\n%s", i, got, want)
		}
		res, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(sum(x), r0 == r0)"})
		if err != nil || res.Stdout != "285 True\n" {
			t.Fatalf("context after resume %d: %+v %v", i, res, err)
		}
	}
	// A snapshot, restored into a new session of the same tenant.
	snap, err := c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{Name: "five"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Bytes < 100_000_000 || len(snap.SHA256) != 64 || snap.Kind != airlock.SnapshotWorkspace || snap.Name != "five" {
		t.Fatalf("snapshot %+v", snap)
	}
	blob := s.blobFile(snap)
	if raw, err := os.ReadFile(blob); err != nil || strings.Contains(string(raw[:min(len(raw), 1<<20)]), "bottom") {
		t.Fatalf("the blob is missing or not sealed (%v)", err)
	}
	restored := s.create(s.a, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	if restored.Image != sess.Image {
		t.Errorf("restored image %s, want the snapshot's %s", restored.Image, sess.Image)
	}
	if got := s.manifest(s.a, restored.ID); got != want {
		t.Fatalf("the restored workspace differs:\n%s\nwant\n%s", got, want)
	}
	if e := s.shell(s.a, restored.ID, "id -u; stat -c %u private.txt; ./run.sh"); e.Stdout != "1000\n1000\nrun\n" {
		t.Errorf("restored files are not the sandbox user's or not runnable: %q %q", e.Stdout, e.Stderr)
	}
	for _, id := range []string{sess.ID, restored.ID} {
		c.DeleteSession(ctx, id)
	}
	s.checkClean()
}

// blobFile is the file that holds a snapshot's blob.
func (s *stack) blobFile(snap *airlock.Snapshot) string {
	s.t.Helper()
	var found string
	filepath.Walk(s.BlobDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && strings.Contains(p, snap.ID) {
			found = p
		}
		return nil
	})
	if found == "" {
		s.t.Fatalf("no blob file for snapshot %s under %s", snap.ID, s.BlobDir)
	}
	return found
}

// A snapshot is its tenant's alone; a changed or cut blob is refused with
// a problem and no session; the quota holds; a deleted snapshot is gone.
func TestSnapshotSafety(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.Keep.SnapshotQuotaBytes = 64 << 10 })
	ctx := ctxFor(t, 5*time.Minute)
	a, b := s.a.c, s.b.c
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	s.shell(s.a, sess.ID, "echo hello > hello.txt; mkdir sub; echo x > sub/x")
	snap, err := a.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Another tenant sees nothing of it.
	_, err = b.Snapshot(ctx, snap.ID)
	wantProblem(t, "another tenant's get", err, 404, "snapshot-not-found")
	wantProblem(t, "another tenant's delete", b.DeleteSnapshot(ctx, snap.ID), 404, "snapshot-not-found")
	_, _, err = b.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	wantProblem(t, "another tenant's restore", err, 404, "snapshot-not-found")
	if page, err := b.ListSnapshots(ctx, "", 0); err != nil || len(page.Snapshots) != 0 {
		t.Fatalf("another tenant's list: %+v %v", page, err)
	}
	if page, err := a.ListSnapshots(ctx, "", 0); err != nil || len(page.Snapshots) != 1 || page.Snapshots[0].ID != snap.ID {
		t.Fatalf("list: %+v %v", page, err)
	}

	// Over the quota: a workspace larger than it.
	s.shell(s.a, sess.ID, "head -c 200000 /dev/urandom > big")
	_, err = a.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{})
	wantProblem(t, "over quota", err, 429, "snapshot-quota")

	blob := s.blobFile(snap)
	orig, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.store.ListSessions(ctx, airlock.SessionFilter{TenantID: s.a.tenant.ID, Limit: 100})
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"one byte flipped", func() []byte { d := append([]byte{}, orig...); d[len(d)/2] ^= 0x01; return d }()},
		{"last byte flipped", func() []byte { d := append([]byte{}, orig...); d[len(d)-1] ^= 0x80; return d }()},
		{"cut short", orig[:len(orig)-20]},
	} {
		if err := os.WriteFile(blob, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err = a.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
		wantProblem(t, tc.name, err, 422, "snapshot-damaged")
	}
	after, _ := s.store.ListSessions(ctx, airlock.SessionFilter{TenantID: s.a.tenant.ID, Limit: 100, LiveOnly: true})
	if len(after) != 1 {
		t.Errorf("%d live sessions after refused restores (%d before), want only the first", len(after), len(before))
	}
	// The original restores again.
	os.WriteFile(blob, orig, 0o600)
	ok := s.create(s.a, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	if e := s.shell(s.a, ok.ID, "cat hello.txt sub/x"); e.Stdout != "hello\nx\n" {
		t.Errorf("restored: %q", e.Stdout)
	}
	if err := a.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	_, err = a.Snapshot(ctx, snap.ID)
	wantProblem(t, "deleted", err, 404, "snapshot-not-found")
	if _, err := os.Stat(blob); !os.IsNotExist(err) {
		t.Errorf("the deleted snapshot's blob is still there (%v)", err)
	}
	a.DeleteSession(ctx, sess.ID)
	a.DeleteSession(ctx, ok.ID)
	s.checkClean()
}

// After the master key is rotated, a server with only the new key still
// restores snapshots taken before.
func TestSnapshotAfterRotation(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	first := newStack(t, nil)
	sess := first.create(first.a, airlock.CreateSessionRequest{Image: "base"})
	first.shell(first.a, sess.ID, "echo before rotation > note")
	snap, err := first.a.c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first.a.c.DeleteSession(ctx, sess.ID)
	newKey, _ := seal.GenerateMasterKey()
	rot, err := seal.NewKeys(first.store, newKey, first.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := rot.Rotate(ctx); err != nil || r.Rewrapped != 1 {
		t.Fatalf("rotate: %+v %v", r, err)
	}
	second := newBareStack(t, teststack.Options{Store: first.store, BlobDir: first.BlobDir, MasterKey: newKey})
	c := second.newClientFor(first.a)
	got, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	if err != nil {
		t.Fatalf("restore after rotation: %v", err)
	}
	e, err := c.Exec(ctx, got.ID, airlock.SessionExecRequest{Shell: "cat note"})
	if err != nil || e.Stdout != "before rotation\n" {
		t.Fatalf("restored after rotation: %+v %v", e, err)
	}
	c.DeleteSession(ctx, got.ID)
	// A server with only the old key cannot open the rotated data key.
	third := newBareStack(t, teststack.Options{Store: first.store, BlobDir: first.BlobDir, MasterKey: first.MasterKey})
	_, _, err = third.newClientFor(first.a).CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	if err == nil {
		t.Fatal("the old master key restored a snapshot after rotation")
	}
}

// Forks with process state share the parent's variables and each draws
// its own random numbers and UUIDs; the parent goes on untouched.
func TestForkWithMemory(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c
	parent := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 900})
	s.shell(s.a, parent.ID, "echo shared > file.txt")
	py, err := c.CreateContext(ctx, parent.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, parent.ID, py.ID, airlock.RunCellRequest{Code: "import random, uuid\nshared = 'parent-' + str(41 + 1)\nrandom.seed(1234)"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ForkSession(ctx, parent.ID, airlock.ForkRequest{Count: 3, IncludeMemory: true})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if len(res.Sessions) != 3 {
		t.Fatalf("%d forks", len(res.Sessions))
	}
	seen := map[string]string{}
	draw := "print(shared, random.random(), uuid.uuid4(), open('file.txt').read().strip())"
	for i, f := range append(append([]*airlock.Session{}, res.Sessions...), parent) {
		if f.ID != parent.ID && (f.ID == parent.ID || f.State != airlock.SessionReady) {
			t.Fatalf("fork %d: %+v", i, f)
		}
		r, err := c.RunCell(ctx, f.ID, py.ID, airlock.RunCellRequest{Code: draw})
		if err != nil || r.Error != nil {
			t.Fatalf("session %d (%s): %+v %v", i, f.ID, r, err)
		}
		fields := strings.Fields(r.Stdout)
		if len(fields) != 4 || fields[0] != "parent-42" || fields[3] != "shared" {
			t.Fatalf("session %d printed %q", i, r.Stdout)
		}
		for _, v := range fields[1:3] {
			if other, dup := seen[v]; dup {
				t.Errorf("session %d drew %s as %s did", i, v, other)
			}
			seen[v] = f.ID
		}
	}
	// The parent's random state was not reseeded: it goes on from its seed.
	if got, err := c.RunCell(ctx, parent.ID, py.ID, airlock.RunCellRequest{Code: "random.seed(1234); print(random.random())"}); err != nil || got.Stdout == "" {
		t.Fatalf("parent: %+v %v", got, err)
	}
	_, err = c.ForkSession(ctx, parent.ID, airlock.ForkRequest{Count: airlock.MaxForks + 1})
	wantProblem(t, "too many forks", err, 400, "invalid-fork-count")
	_, err = s.b.c.ForkSession(ctx, parent.ID, airlock.ForkRequest{Count: 1})
	wantProblem(t, "another tenant's fork", err, 404, "session-not-found")
	// Workspace-only forks: files, fresh processes.
	ws, err := c.ForkSession(ctx, parent.ID, airlock.ForkRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ws.Sessions {
		if e := s.shell(s.a, f.ID, "cat file.txt"); e.Stdout != "shared\n" {
			t.Errorf("workspace fork: %q", e.Stdout)
		}
		if ctxs, _ := c.ListContexts(ctx, f.ID); len(ctxs) != 0 {
			t.Errorf("a workspace fork has code contexts: %v", ctxs)
		}
	}
	for _, f := range append(append(res.Sessions, ws.Sessions...), parent) {
		c.DeleteSession(ctx, f.ID)
	}
	s.checkClean()
}

// A paused session outlives the server: the next start leaves it paused
// (its recovery does not end it), and it resumes with its files and
// variables.
func TestPauseSurvivesRestart(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	first := newStack(t, nil)
	c := first.a.c
	sess := first.create(first.a, airlock.CreateSessionRequest{TimeoutS: 900})
	first.shell(first.a, sess.ID, "echo kept > kept.txt")
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "v = 'still here'"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	// The next start, on the same store, with the first never stopped.
	second := newBareStack(t, teststack.Options{Store: first.store, BlobDir: first.BlobDir, MasterKey: first.MasterKey})
	rep, err := second.mgr.Recover(ctx)
	if err != nil || rep.Paused != 1 || rep.Ended != 0 {
		t.Fatalf("recover: %+v %v", rep, err)
	}
	if _, err := second.Provisioner.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	c2 := second.newClientFor(first.a)
	if got, err := c2.Session(ctx, sess.ID); err != nil || got.State != airlock.SessionPaused {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if _, err := c2.ResumeSession(ctx, sess.ID); err != nil {
		t.Fatalf("resume after restart: %v", err)
	}
	r, err := c2.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(v, open('kept.txt').read().strip())"})
	if err != nil || r.Stdout != "still here kept\n" {
		t.Fatalf("after resume: %+v %v", r, err)
	}
	// Deleting a paused session ends it and removes what was saved.
	if _, err := c2.PauseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	end, err := c2.DeleteSession(ctx, sess.ID)
	if err != nil || end.State != airlock.SessionDestroyed || end.EndReason != airlock.EndDeleted {
		t.Fatalf("delete paused: %+v %v", end, err)
	}
	if pauses, _ := first.store.Pauses(ctx); len(pauses) != 0 {
		t.Errorf("pauses left: %v", pauses)
	}
	_ = fmt.Sprint()
}

// A snapshot with process state: the session goes on; sessions made from
// it have its variables and files, and each its own random numbers; a
// flipped byte is refused; the request's network is refused, not taken
// from the snapshot.
func TestMemorySnapshot(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 900})
	s.shell(s.a, sess.ID, "echo saved > f.txt")
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "import random, uuid\nv = 'kept'\nrandom.seed(7)"}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{IncludeMemory: true, Name: "mem"})
	if err != nil {
		t.Fatalf("memory snapshot: %v", err)
	}
	if snap.Kind != airlock.SnapshotMemory || snap.Bytes == 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	// The session goes on, its state untouched.
	if r, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(v)"}); err != nil || r.Stdout != "kept\n" {
		t.Fatalf("the session after its memory snapshot: %+v %v", r, err)
	}
	seen := map[string]bool{}
	var made []string
	for i := 0; i < 2; i++ {
		got := s.create(s.a, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
		made = append(made, got.ID)
		r, err := c.RunCell(ctx, got.ID, py.ID, airlock.RunCellRequest{Code: "print(v, random.random(), uuid.uuid4(), open('f.txt').read().strip())"})
		if err != nil || r.Error != nil {
			t.Fatalf("restored %d: %+v %v", i, r, err)
		}
		f := strings.Fields(r.Stdout)
		if len(f) != 4 || f[0] != "kept" || f[3] != "saved" {
			t.Fatalf("restored %d printed %q", i, r.Stdout)
		}
		for _, x := range f[1:3] {
			if seen[x] {
				t.Errorf("restored %d drew %s again", i, x)
			}
			seen[x] = true
		}
	}
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID, Network: &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"example.com"}}})
	wantProblem(t, "with a network", err, 400, "snapshot-mismatch")
	_, _, err = s.b.c.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	wantProblem(t, "another tenant's", err, 404, "snapshot-not-found")
	blob := s.blobFile(snap)
	orig, _ := os.ReadFile(blob)
	d := append([]byte{}, orig...)
	d[len(d)/3] ^= 0x10
	os.WriteFile(blob, d, 0o600)
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	wantProblem(t, "flipped byte", err, 422, "snapshot-damaged")
	for _, id := range append(made, sess.ID) {
		c.DeleteSession(ctx, id)
	}
	if entries, _ := os.ReadDir(s.cfg.Keep.PauseDir); len(entries) != 0 {
		t.Errorf("left in the pause directory: %v", entries)
	}
	s.checkClean()
}

// A session paused for longer than the node's maximum is ended by the
// reaper and what was saved of it removed. The pause of a session that is
// not this node's, saved on no disk of its own (another node of a
// fleet's, in the shared store), is left alone, however old.
func TestPausedTooLong(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.Keep.MaxPausedAge = time.Millisecond })
	ctx := ctxFor(t, 2*time.Minute)
	c := s.a.c
	foreign := &airlock.SessionPause{SessionID: "another-nodes-session", TenantID: s.a.tenant.ID,
		Dir: filepath.Join(t.TempDir(), "on-another-node"), Backend: "gvisor", PausedAt: time.Now().Add(-time.Hour)}
	if err := s.store.PutPause(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	if _, err := c.PauseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the reaper to end the paused session", func() bool {
		got, err := c.Session(ctx, sess.ID)
		return err == nil && got.State == airlock.SessionDestroyed && got.EndReason == airlock.EndPausedTooLong
	})
	if entries, _ := os.ReadDir(s.cfg.Keep.PauseDir); len(entries) != 0 {
		t.Errorf("left in the pause directory: %v", entries)
	}
	_, err := c.ResumeSession(ctx, sess.ID)
	wantProblem(t, "resume after the end", err, 409, "session-ended")
	if _, err := s.store.Pause(ctx, foreign.TenantID, foreign.SessionID); err != nil {
		t.Errorf("the reaper removed another node's pause record: %v", err)
	}
}

// A resume is admitted like a new session: a paused session holds no
// room, so the tenant may fill its quota meanwhile, and then the resume
// is refused with the quota's 429 (the session stays paused, nothing
// lost); with room again, it resumes. Paused time counts as no sandbox's.
func TestResumeWithinQuotas(t *testing.T) {
	s := newStackWith(t, teststack.Options{Quotas: quota.Limits{quota.Sessions: 1}})
	ctx := ctxFor(t, 3*time.Minute)
	c := s.a.c
	first := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	if e := s.shell(s.a, first.ID, "echo kept > /workspace/k"); e.ExitCode != 0 {
		t.Fatalf("write: %+v", e)
	}
	if _, err := c.PauseSession(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	_, err := c.ResumeSession(ctx, first.ID)
	wantProblem(t, "resume at the session quota", err, 429, "session-quota")
	if got, err := c.Session(ctx, first.ID); err != nil || got.State != airlock.SessionPaused {
		t.Fatalf("after the refused resume: %+v %v, want paused", got, err)
	}
	if _, err := c.DeleteSession(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResumeSession(ctx, first.ID); err != nil {
		t.Fatalf("resume with room again: %v", err)
	}
	if e := s.shell(s.a, first.ID, "cat /workspace/k"); e.Stdout != "kept\n" {
		t.Fatalf("the file after the resume: %+v", e)
	}
}
