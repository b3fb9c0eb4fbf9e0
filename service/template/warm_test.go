package template_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/provision"
)

// TestTemplateDeleteDrainsItsPool: a template in use holds pool members;
// DELETE /v1/templates/{name} destroys them at once. The node's garbage
// collector then removes a template directory nothing refers to and
// keeps the templates that exist.
func TestTemplateDeleteDrainsItsPool(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	img := testregistry.Image(t, nil, testregistry.MiniRootfs(t, testenv.Image(t, "base").Rootfs))
	testregistry.Push(t, reg+"/t/mini:1", img, "", "")
	s := teststack.New(t, teststack.Options{Pool: provision.PoolConfig{Max: 4, TemplateMax: 2, TemplateIdle: 10 * time.Minute},
		Templates: &node.TemplatesConfig{InsecureRegistries: []string{reg}}})
	ctx := context.Background()
	a := s.NewTenant(t, "a")
	for _, name := range []string{"used", "other"} {
		if _, err := a.Client.CreateTemplate(ctx, airlock.CreateTemplateRequest{Name: name, FromImage: reg + "/t/mini:1"}); err != nil {
			t.Fatal(err)
		}
		if err := a.Client.TemplateLogs(ctx, name, discard{}); err != nil {
			t.Fatal(err)
		}
	}
	tp, err := a.Client.Template(ctx, "used")
	if err != nil || tp.Status != airlock.TemplateReady {
		t.Fatalf("template %+v, %v", tp, err)
	}
	e, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo hi", Template: "used"})
	if err != nil || e.ExitCode != 0 {
		t.Fatalf("run: %+v, %v", e, err)
	}
	image := tp.ImageName()
	testreq.Eventually(t, 2*time.Minute, "a pool member of the used template", func() bool {
		n, _ := s.Provisioner.ImagePool(image)
		return n >= 1
	})
	if err := a.Client.DeleteTemplate(ctx, "used"); err != nil {
		t.Fatal(err)
	}
	if n, mem := s.Provisioner.ImagePool(image); n != 0 || mem != 0 {
		t.Fatalf("after delete the template holds %d members (%d bytes)", n, mem)
	}
	// A run of it now is not found, and nothing is readied for it again.
	if _, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "true", Template: "used"}); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("run after delete: %v", err)
	}

	// A leftover directory of a template with no record goes; the
	// other template stays and still runs.
	stray := filepath.Join(s.Node.StateDir(), "templates", airlock.NewID())
	if err := os.MkdirAll(filepath.Join(stray, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.Node.CollectGarbage(ctx)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("the stray template directory is still there: %v", err)
	}
	if e, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo still", Template: "other"}); err != nil || e.ExitCode != 0 {
		t.Fatalf("the other template after collection: %+v, %v", e, err)
	}
}
