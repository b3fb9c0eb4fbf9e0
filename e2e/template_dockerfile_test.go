package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// tarOf makes a tar of path -> content.
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, c := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const e2eDockerfile = `FROM base
ARG GREETING=hello
ENV APP_HOME=/opt/app
WORKDIR $APP_HOME
COPY server.py ./
RUN echo "$GREETING" > greeting.txt && python3 -m py_compile server.py
RUN mkdir /srv/out && chown sandbox /srv/out
USER sandbox
RUN id -un > /srv/out/built-by
`

// waitTemplate polls GET /v1/templates/{name} until it leaves building.
func waitTemplate(t *testing.T, s *stack, key, name string) airlock.Template {
	t.Helper()
	var tpl airlock.Template
	if !testreq.Poll(10*time.Minute, func() bool {
		r := s.do(t, http.MethodGet, "/v1/templates/"+name, key, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET template: %d %s", r.status, r.body)
		}
		json.Unmarshal(r.body, &tpl)
		return tpl.Status != airlock.TemplateBuilding
	}) {
		t.Fatalf("template %s still building after 10 minutes", name)
	}
	return tpl
}

// TestTemplateFromDockerfile builds a template from a Dockerfile with a
// context over REST, rebuilds it from the cache, starts a session from
// it that finds its start_cmd running, its files, environment and user,
// and checks the refusals: an unsupported instruction (400 with its
// line), a failing RUN (failed, naming its line), another tenant's
// context and a revoked key.
func TestTemplateFromDockerfile(t *testing.T) {
	st := teststack.New(t, teststack.Options{MaxTimeout: maxTimeout, Templates: &node.TemplatesConfig{}})
	s := &stack{store: st.Store, blobs: st.Blobs, backend: st.Backend, prov: st.Provisioner, url: st.URL}
	s.a = s.newTenant(t, "tenant-a")
	s.b = s.newTenant(t, "tenant-b")
	defer s.close(t)
	key := s.a.key
	up := s.do(t, http.MethodPost, "/v1/templates/contexts", key, bytes.NewReader(tarOf(t, map[string]string{
		"server.py": "import os, time\nopen('/tmp/ready', 'w').write(os.environ['APP_HOME'])\nwhile True:\n    time.sleep(1)\n",
	})), map[string]string{"Content-Type": "application/x-tar"})
	if up.status != http.StatusCreated {
		t.Fatalf("upload context: %d %s", up.status, up.body)
	}
	var tc airlock.TemplateContext
	json.Unmarshal(up.body, &tc)

	create := func(name, df string, extra map[string]any) rawResponse {
		body := map[string]any{"name": name, "dockerfile": df, "context": tc.ID}
		for k, v := range extra {
			body[k] = v
		}
		b, _ := json.Marshal(body)
		return s.do(t, http.MethodPost, "/v1/templates", key, bytes.NewReader(b), map[string]string{"Content-Type": "application/json"})
	}
	start := map[string]any{"start_cmd": "exec python3 /opt/app/server.py", "ready_cmd": "test -s /tmp/ready"}
	t0 := time.Now()
	r := create("web", e2eDockerfile, start)
	if r.status != http.StatusAccepted {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var tpl airlock.Template
	json.Unmarshal(r.body, &tpl)
	if tpl.Status != airlock.TemplateBuilding {
		t.Errorf("created with status %q, want building", tpl.Status)
	}
	tpl = waitTemplate(t, s, key, "web")
	cold := time.Since(t0)
	if tpl.Status != airlock.TemplateReady {
		logs := s.do(t, http.MethodGet, "/v1/templates/web/logs", key, nil, nil)
		t.Fatalf("template %s: %s (line %d)\n%s", tpl.Status, tpl.Reason, tpl.FailedLine, logs.body)
	}
	if tpl.User != "sandbox" || tpl.Workdir != "/opt/app" || !strings.Contains(strings.Join(tpl.Env, " "), "APP_HOME=/opt/app") {
		t.Errorf("template config: user %q workdir %q env %q", tpl.User, tpl.Workdir, tpl.Env)
	}
	logs := s.do(t, http.MethodGet, "/v1/templates/web/logs", key, nil, nil)
	if !strings.Contains(string(logs.body), "[line 6] RUN") {
		t.Errorf("build log lacks the steps:\n%s", logs.body)
	}

	// The same Dockerfile again: every step from the cache.
	t0 = time.Now()
	if r := create("web2", e2eDockerfile, start); r.status != http.StatusAccepted {
		t.Fatalf("create again: %d %s", r.status, r.body)
	}
	if tpl2 := waitTemplate(t, s, key, "web2"); tpl2.Status != airlock.TemplateReady {
		t.Fatalf("rebuild: %s", tpl2.Reason)
	}
	cached := time.Since(t0)
	logs = s.do(t, http.MethodGet, "/v1/templates/web2/logs", key, nil, nil)
	if n := strings.Count(string(logs.body), "CACHED"); n != 5 {
		t.Errorf("rebuild: %d steps cached, want 5 (WORKDIR, COPY and three RUNs)\n%s", n, logs.body)
	}
	t.Logf("template build over REST: cold %.1fs, from cache %.1fs", cold.Seconds(), cached.Seconds())

	// A session from the template: the start_cmd runs, the files, env
	// and user are the template's.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, _, err := s.a.client.CreateSession(ctx, airlock.CreateSessionRequest{Template: "web"})
	if err != nil {
		t.Fatalf("session from the template: %v", err)
	}
	defer s.a.client.DeleteSession(context.Background(), sess.ID)
	ex, err := s.a.client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat /tmp/ready; echo; cat /opt/app/greeting.txt /srv/out/built-by; " +
		`python3 -c "import glob; print(sum(('serv'+'er.py').encode() in open(p,'rb').read() for p in glob.glob('/proc/[0-9]*/cmdline')))"`})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(ex.Stdout); ex.ExitCode != 0 || len(got) != 4 || got[0] != "/opt/app" || got[1] != "hello" || got[2] != "sandbox" || got[3] != "1" {
		t.Errorf("in the session: exit %d %q %s (want APP_HOME, the greeting, the build user and one server)", ex.ExitCode, got, ex.Stderr)
	}

	// Refusals.
	r = create("bad", "FROM base\nRUN true\nEXPOSE 80\n", nil)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid-dockerfile") || !strings.Contains(string(r.body), `"line":3`) {
		t.Errorf("unsupported instruction: %d %s", r.status, r.body)
	}
	if r := s.do(t, http.MethodGet, "/v1/templates/bad", key, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("a refused Dockerfile was recorded: %d %s", r.status, r.body)
	}
	if r := create("fails", "FROM base\nRUN true\n\nRUN echo boom >&2; exit 7\n", nil); r.status != http.StatusAccepted {
		t.Fatalf("create failing: %d %s", r.status, r.body)
	}
	if f := waitTemplate(t, s, key, "fails"); f.Status != airlock.TemplateFailed || f.FailedLine != 4 || !strings.Contains(f.Reason, "exit code 7") {
		t.Errorf("failing RUN: %s line %d %q", f.Status, f.FailedLine, f.Reason)
	}
	// Tenant B cannot build with A's context, nor see A's template.
	b, _ := json.Marshal(map[string]any{"name": "steal", "dockerfile": "FROM base\nCOPY . /x/\n", "context": tc.ID})
	if r := s.do(t, http.MethodPost, "/v1/templates", s.b.key, bytes.NewReader(b), map[string]string{"Content-Type": "application/json"}); r.status != http.StatusNotFound {
		t.Errorf("tenant B used A's context: %d %s", r.status, r.body)
	}
	if r := s.do(t, http.MethodGet, "/v1/templates/web/logs", s.b.key, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("tenant B read A's build log: %d %s", r.status, r.body)
	}
	// A revoked key of tenant A is refused on every template route.
	secret, ak := airlock.NewAPIKey(s.a.tenant.ID, "", time.Now())
	if err := s.store.CreateAPIKey(context.Background(), ak); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.RevokeAPIKey(context.Background(), ak.ID); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ method, path string }{
		{http.MethodPost, "/v1/templates"}, {http.MethodPost, "/v1/templates/contexts"},
		{http.MethodGet, "/v1/templates/web"}, {http.MethodGet, "/v1/templates/web/logs"},
	} {
		if r := s.do(t, rt.method, rt.path, secret, strings.NewReader("{}"), map[string]string{"Content-Type": "application/json"}); r.status != http.StatusUnauthorized {
			t.Errorf("%s %s with a revoked key: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}
