package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// waitTemplate polls a template until its build has ended and fails the
// test unless it is ready.
func (s *stack) waitTemplate(tc tenantClient, name string) *airlock.Template {
	s.t.Helper()
	ctx := ctxFor(s.t, 5*time.Minute)
	for {
		t, err := tc.c.Template(ctx, name)
		if err != nil {
			s.t.Fatalf("template %s: %v", name, err)
		}
		switch t.Status {
		case airlock.TemplateReady:
			return t
		case airlock.TemplateFailed:
			s.t.Fatalf("template %s failed: %s", name, t.Reason)
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("template %s still %s", name, t.Status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// fromTemplate makes a session from a template.
func (s *stack) fromTemplate(tc tenantClient, name string) *airlock.Session {
	s.t.Helper()
	sess, _, err := tc.c.CreateSession(ctxFor(s.t, 2*time.Minute), airlock.CreateSessionRequest{Template: name})
	if err != nil {
		s.t.Fatalf("create a session from template %s: %v", name, err)
	}
	return sess
}

// A template from a session holds what the session wrote (its workspace:
// files, and what pip installs for the sandbox user, which lands in
// /workspace/.local); the image's root filesystem is read-only in the
// session, so nothing else can have changed. Sessions and one-shot runs
// start from the template after its session has ended; the route's
// refusals are problems.
func TestTemplateFromSession(t *testing.T) {
	s := newStackWith(t, teststack.Options{Templates: &node.TemplatesConfig{}})
	ctx := ctxFor(t, 10*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 900})
	e := s.shell(s.a, sess.ID, "mkdir -p .local/lib/python3/site-packages proj && echo 'VALUE = 42' > .local/lib/python3/site-packages/mymod.py && echo kept > proj/notes.txt && ln -s proj/notes.txt link")
	if e.ExitCode != 0 {
		t.Fatalf("fill the workspace: %+v", e)
	}
	// The root filesystem is read-only to the session: /etc cannot be
	// edited, so a template need not look for changes there.
	if e := s.shell(s.a, sess.ID, "echo x >> /etc/hostname"); e.ExitCode == 0 {
		t.Fatalf("/etc was writable in a session: %+v", e)
	}

	// Refusals.
	_, err := s.b.c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "mine"})
	wantProblem(t, "another tenant's session", err, 404, "session-not-found")
	_, err = c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "Bad Name"})
	wantProblem(t, "a bad name", err, 400, "invalid-template-name")
	_, err = c.SessionTemplate(ctx, "01NOSUCHSESSION0000000000", airlock.SessionTemplateRequest{Name: "mine"})
	wantProblem(t, "no such session", err, 404, "session-not-found")
	secret, key := airlock.NewAPIKey(s.a.tenant.ID, "", time.Now())
	if err := s.store.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.RevokeAPIKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if st, _, body := s.raw("POST", "/v1/sessions/"+sess.ID+"/template", secret, "application/json", stringsReader(`{"name":"mine"}`)); st != 401 {
		t.Errorf("a revoked key: %d %s", st, body)
	}
	opSecret, opKey := airlock.NewAPIKey("", "", time.Now())
	opKey.Role, opKey.Name = airlock.RoleAdmin, "operator"
	if err := s.store.CreateAPIKey(ctx, opKey); err != nil {
		t.Fatal(err)
	}
	if st, _, body := s.raw("POST", "/v1/sessions/"+sess.ID+"/template", opSecret, "application/json", stringsReader(`{"name":"mine"}`)); st != 403 || !contains(body, "tenant-key-required") {
		t.Errorf("an operator key: %d %s", st, body)
	}
	if st, _, body := s.raw("POST", "/v1/sessions/"+sess.ID+"/template", s.a.key, "application/json", stringsReader(`{"name":"mine","nope":1}`)); st != 400 {
		t.Errorf("an unknown field: %d %s", st, body)
	}

	start := time.Now()
	tpl, err := c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "mine"})
	if err != nil {
		t.Fatalf("template from session: %v", err)
	}
	if tpl.Source != airlock.TemplateFromSession || tpl.SessionID != sess.ID || tpl.TenantID != s.a.tenant.ID || tpl.MemorySnapshotID != "" {
		t.Fatalf("template %+v", tpl)
	}
	_, err = c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "mine"})
	wantProblem(t, "a name taken", err, 409, "template-exists")
	// The session goes on.
	if e := s.shell(s.a, sess.ID, "echo later > later.txt && cat proj/notes.txt"); e.ExitCode != 0 || e.Stdout != "kept\n" {
		t.Fatalf("the session after the template: %+v", e)
	}
	ready := s.waitTemplate(s.a, "mine")
	t.Logf("template from a session ready in %v (%d bytes)", time.Since(start).Round(time.Millisecond), ready.SizeBytes)
	if ready.SizeBytes == 0 || ready.ImageHash == "" {
		t.Errorf("ready template %+v", ready)
	}
	if _, err := s.b.c.Template(ctx, "mine"); err == nil {
		t.Errorf("another tenant sees the template")
	}

	// The template outlives its session.
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "again"})
	wantProblem(t, "an ended session", err, 409, "session-ended")

	from := s.fromTemplate(s.a, "mine")
	check := "cat proj/notes.txt; readlink link; PYTHONPATH=.local/lib/python3/site-packages python3 -c 'import mymod; print(mymod.VALUE)'; ls later.txt 2>&1 >/dev/null | wc -l; touch new.txt && echo writable"
	e = s.shell(s.a, from.ID, check)
	if e.ExitCode != 0 || e.Stdout != "kept\nproj/notes.txt\n42\n1\nwritable\n" {
		t.Fatalf("a session from the template: %+v", e)
	}
	if from.Image != tpl.ImageName() {
		t.Errorf("the session's image is %s, want %s", from.Image, tpl.ImageName())
	}
	// Its workspace is its own: a second session does not see new.txt.
	from2 := s.fromTemplate(s.a, "mine")
	if e := s.shell(s.a, from2.ID, "ls new.txt 2>/dev/null | wc -l"); e.Stdout != "0\n" {
		t.Errorf("a second session saw the first one's file: %+v", e)
	}
	run, err := c.Execute(ctx, airlock.ExecuteRequest{Language: "python", Template: "mine", Code: "import sys; sys.path.insert(0, '.local/lib/python3/site-packages'); import mymod; print(mymod.VALUE, open('proj/notes.txt').read().strip())"})
	if err != nil || run.ExitCode != 0 || run.Stdout != "42 kept\n" {
		t.Fatalf("a one-shot run from the template: %+v %v", run, err)
	}
	for _, a := range run.Artifacts {
		if strings.HasPrefix(a.Filename, "proj/") || strings.HasPrefix(a.Filename, ".local/") {
			t.Errorf("the template's own file came back as an artifact: %s", a.Filename)
		}
	}
	for _, id := range []string{from.ID, from2.ID} {
		c.DeleteSession(ctx, id)
	}
	if err := c.DeleteTemplate(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	s.checkClean()
}

// A template from a session with its memory: every session from it is
// restored with the session's code context and reseeded, so no two draw
// the same random numbers; a paused session is refused.
func TestTemplateFromSessionMemory(t *testing.T) {
	s := newStackWith(t, teststack.Options{Templates: &node.TemplatesConfig{}})
	ctx := ctxFor(t, 10*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 900})
	s.shell(s.a, sess.ID, "echo saved > f.txt")
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "import random, uuid, os\nv = 'in memory'\nrandom.seed(7)"}); err != nil {
		t.Fatal(err)
	}
	tpl, err := c.SessionTemplate(ctx, sess.ID, airlock.SessionTemplateRequest{Name: "warm", IncludeMemory: true})
	if err != nil {
		t.Fatalf("template with memory: %v", err)
	}
	if tpl.MemorySnapshotID == "" {
		t.Fatalf("template %+v holds no memory", tpl)
	}
	// The session goes on, its state untouched.
	if r, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(v)"}); err != nil || r.Stdout != "in memory\n" {
		t.Fatalf("the session after the template: %+v %v", r, err)
	}
	s.waitTemplate(s.a, "warm")
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var made []string
	for i := range 2 {
		got := s.fromTemplate(s.a, "warm")
		made = append(made, got.ID)
		r, err := c.RunCell(ctx, got.ID, py.ID, airlock.RunCellRequest{Code: "print(v, random.random(), uuid.uuid4(), os.urandom(8).hex(), open('f.txt').read().strip())"})
		if err != nil || r.Error != nil {
			t.Fatalf("session %d from the template: %+v %v", i, r, err)
		}
		f := strings.Fields(r.Stdout)
		if len(f) != 6 || f[0]+" "+f[1] != "in memory" || f[5] != "saved" {
			t.Fatalf("session %d from the template printed %q", i, r.Stdout)
		}
		for _, x := range f[2:5] {
			if seen[x] {
				t.Errorf("session %d from the template drew %s again", i, x)
			}
			seen[x] = true
		}
	}
	// A one-shot run uses the template's filesystem only.
	run, err := c.Execute(ctx, airlock.ExecuteRequest{Language: "python", Template: "warm", Code: "print(open('f.txt').read().strip(), 'v' in globals())"})
	if err != nil || run.Stdout != "saved False\n" {
		t.Fatalf("a one-shot run from the template: %+v %v", run, err)
	}
	// A paused session is refused with a problem that says so.
	p := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 900})
	if _, err := c.PauseSession(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.SessionTemplate(ctx, p.ID, airlock.SessionTemplateRequest{Name: "paused"})
	wantProblem(t, "a paused session", err, 409, "session-paused")
	for _, id := range append(made, p.ID) {
		c.DeleteSession(ctx, id)
	}
	// The template's memory cannot be deleted from under it.
	err = c.DeleteSnapshot(ctx, tpl.MemorySnapshotID)
	wantProblem(t, "deleting a template's memory snapshot", err, 409, "snapshot-in-use")
	// Deleting the template deletes its memory snapshot.
	if err := c.DeleteTemplate(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx, tpl.MemorySnapshotID); err == nil {
		t.Errorf("the template's memory snapshot outlived it")
	}
	s.checkClean()
}
