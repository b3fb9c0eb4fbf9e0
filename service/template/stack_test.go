package template_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// TestTemplateEndToEnd: a node with templates on imports an image from a
// registry on loopback through the API; a session and a one-shot run from
// the template see its files; the template routes answer another
// tenant's key 404 and a revoked key 401; a session in use blocks delete.
func TestTemplateEndToEnd(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	img := testregistry.Image(t, []string{"GREETING=hello-env"},
		testregistry.MiniRootfs(t, testenv.Image(t, "base").Rootfs),
		testregistry.Layer(t, testregistry.Entry{Name: "app/", Dir: true}, testregistry.Entry{Name: "app/hello.txt", Body: []byte("hello from the template\n")}))
	testregistry.Push(t, reg+"/t/mini:1", img, "", "")

	s := teststack.New(t, teststack.Options{Templates: &node.TemplatesConfig{InsecureRegistries: []string{reg}}})
	ctx := context.Background()
	a, b := s.NewTenant(t, "a"), s.NewTenant(t, "b")

	tp, err := a.Client.CreateTemplate(ctx, airlock.CreateTemplateRequest{Name: "mini", FromImage: reg + "/t/mini:1"})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Status != airlock.TemplateBuilding {
		t.Fatalf("created %+v", tp)
	}
	var logText strings.Builder
	if err := a.Client.TemplateLogs(ctx, "mini", &logText); err != nil { // follows to the end of the build
		t.Fatal(err)
	}
	tp, err = a.Client.Template(ctx, "mini")
	if err != nil || tp.Status != airlock.TemplateReady {
		t.Fatalf("template = %+v, %v; log:\n%s", tp, err, logText.String())
	}
	if !strings.Contains(logText.String(), "ready: mini") {
		t.Errorf("log:\n%s", logText.String())
	}

	// Another tenant's key: not found on every route; a revoked key: 401.
	for _, p := range []string{"/v1/templates/mini", "/v1/templates/mini/logs"} {
		if code := status(t, s.URL, http.MethodGet, p, b.Key); code != http.StatusNotFound {
			t.Errorf("GET %s with another tenant's key = %d, want 404", p, code)
		}
	}
	if code := status(t, s.URL, http.MethodDelete, "/v1/templates/mini", b.Key); code != http.StatusNotFound {
		t.Errorf("DELETE with another tenant's key = %d, want 404", code)
	}
	if l, err := b.Client.ListTemplates(ctx); err != nil || len(l) != 0 {
		t.Errorf("b lists %+v, %v", l, err)
	}
	if _, err := b.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "true", Template: "mini"}); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b runs from a's template: %v", err)
	}
	revoked := s.NewTenant(t, "c")
	if _, err := s.Store.RevokeAPIKey(ctx, keyID(t, s, revoked)); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"GET", "/v1/templates"}, {"POST", "/v1/templates"}, {"GET", "/v1/templates/mini"},
		{"DELETE", "/v1/templates/mini"}, {"GET", "/v1/templates/mini/logs"}, {"POST", "/v1/templates/contexts"}} {
		if code := status(t, s.URL, r[0], r[1], revoked.Key); code != http.StatusUnauthorized {
			t.Errorf("%s %s with a revoked key = %d, want 401", r[0], r[1], code)
		}
	}
	if code := status(t, s.URL, http.MethodGet, "/v1/admin/templates", a.Key); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Errorf("a tenant key on the admin route = %d", code)
	}

	// A one-shot run and a session from the template.
	e, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "cat /app/hello.txt; echo $GREETING", Template: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	if e.ExitCode != 0 || !strings.Contains(e.Stdout, "hello from the template") || !strings.Contains(e.Stdout, "hello-env") {
		t.Errorf("one-shot from the template: exit %v stdout %q stderr %q", e.ExitCode, e.Stdout, e.Stderr)
	}
	sess, _, err := a.Client.CreateSession(ctx, airlock.CreateSessionRequest{Template: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := a.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat /app/hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(x.Stdout, "hello from the template") {
		t.Errorf("session exec: stdout %q stderr %q", x.Stdout, x.Stderr)
	}
	if err := a.Client.DeleteTemplate(ctx, "mini"); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Errorf("delete while a session uses it = %v, want conflict", err)
	}
	if _, err := a.Client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	testreq.Eventually(t, time.Minute, "the template deletable", func() bool {
		return a.Client.DeleteTemplate(ctx, "mini") == nil
	})
	if _, err := a.Client.Template(ctx, "mini"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("after delete: %v", err)
	}
}

func status(t *testing.T, base, method, path, key string) int {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"name": "x", "from_image": "127.0.0.1:1/x:1"}`)
	}
	req, _ := http.NewRequest(method, base+path, body)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func keyID(t *testing.T, s *teststack.Stack, tn teststack.Tenant) string {
	t.Helper()
	keys, err := tn.Client.ListKeys(context.Background())
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of %s: %v", tn.Name, err)
	}
	return keys[0].ID
}
