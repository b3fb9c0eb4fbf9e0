package e2b_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/teststack"
	anode "github.com/airlockhq/airlock/node"
)

// laterTemplates resolves through the node's template service, which is
// made after the E2B config is.
type laterTemplates struct{ n **node }

func (l laterTemplates) ResolveTemplate(ctx context.Context, tenantID, name string) (*airlock.Image, error) {
	return (*l.n).st.Node.Templates.ResolveTemplate(ctx, tenantID, name)
}

// E2B's templateID names a template made from a session like any other
// template of the tenant: the sandbox has the session's files, after the
// session has ended; another tenant's templateID of that name is a 404.
func TestTemplateFromSessionByTemplateID(t *testing.T) {
	var n *node
	n = newNodeConfig(t, teststack.Options{NoServer: true, Templates: &anode.TemplatesConfig{}}, func(c *e2b.Config) {
		c.UserTemplates = laterTemplates{&n}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := n.st.Sessions
	src, _, err := m.CreateSession(ctx, n.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 300}, "")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := m.Exec(ctx, n.a, src.ID, airlock.SessionExecRequest{Shell: "echo from-session > kept.txt"}, nil); err != nil || e.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", e, err)
	}
	if _, err := m.TemplateFromSession(ctx, n.a, src.ID, airlock.SessionTemplateRequest{Name: "e2b-sess"}); err != nil {
		t.Fatal(err)
	}
	for {
		tpl, err := n.st.Node.Templates.GetTemplate(ctx, n.a, "e2b-sess")
		if err != nil {
			t.Fatal(err)
		}
		if tpl.Status == airlock.TemplateFailed {
			t.Fatalf("template failed: %s", tpl.Reason)
		}
		if tpl.Status == airlock.TemplateReady {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("template still building")
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := m.DeleteSession(ctx, n.a, src.ID); err != nil {
		t.Fatal(err)
	}
	s := n.create(t, n.keyA, `{"templateID":"e2b-sess"}`)
	if s.TemplateID != "e2b-sess" {
		t.Errorf("templateID %q", s.TemplateID)
	}
	e, err := m.Exec(ctx, n.a, s.SandboxID, airlock.SessionExecRequest{Shell: "cat kept.txt"}, nil)
	if err != nil || e.Stdout != "from-session\n" {
		t.Fatalf("a sandbox from the template: %+v %v", e, err)
	}
	m.DeleteSession(ctx, n.a, s.SandboxID)
	r := n.do(t, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": n.keyB}, strings.NewReader(`{"templateID":"e2b-sess"}`))
	if r.status != 404 {
		t.Errorf("another tenant's templateID: %d %s", r.status, r.body)
	}
}
