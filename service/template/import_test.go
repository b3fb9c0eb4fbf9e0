package template_test

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/service/template"
)

type fixture struct {
	state string
	store *memStore
	svc   *template.Service
}

func newFixture(t testing.TB, oci template.OCIConfig, quota int64) *fixture {
	t.Helper()
	testenv.RequireRoot(t)
	agent := testenv.Agent(t)
	state := t.TempDir()
	oci.StateDir = state
	b, err := template.NewOCIBuilder(oci)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	svc, err := template.New(template.Config{
		StateDir: state, Store: st, AgentPath: agent, QuotaBytes: quota,
		Builders: map[airlock.TemplateSource]template.Builder{airlock.TemplateFromImage: b, airlock.TemplateFromArchive: b},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return &fixture{state: state, store: st, svc: svc}
}

// wait returns the template once its build is over.
func (f *fixture) wait(t testing.TB, tenant *airlock.Tenant, name string) *airlock.Template {
	t.Helper()
	var got *airlock.Template
	testreq.Eventually(t, 5*time.Minute, "template "+name+" built", func() bool {
		tp, err := f.svc.GetTemplate(context.Background(), tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		got = tp
		return tp.Status != airlock.TemplateBuilding
	})
	return got
}

func (f *fixture) log(t *testing.T, tenant *airlock.Tenant, name string) string {
	t.Helper()
	r, err := f.svc.TemplateLog(context.Background(), tenant, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

func layerFiles(t *testing.T, state string) int {
	ents, err := os.ReadDir(template.LayerCacheDir(state))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// TestImportFromRegistry pushes images built here to a real registry on
// loopback and imports them: whiteouts and hard links applied, the agent
// and hardening added, the image's env kept, layers cached by digest (a
// second image sharing the base layer pulls only its own), tenant
// templates private and operator templates visible to all.
func TestImportFromRegistry(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	f := newFixture(t, template.OCIConfig{InsecureRegistries: []string{reg}}, 0)
	ctx := context.Background()
	base := testregistry.MiniRootfs(t, testenv.Image(t, "base").Rootfs)
	lower := testregistry.Layer(t,
		testregistry.Entry{Name: "app/", Dir: true},
		testregistry.Entry{Name: "app/hello.txt", Body: []byte("hello from the template\n")},
		testregistry.Entry{Name: "app/gone.txt", Body: []byte("removed by a whiteout")},
		testregistry.Entry{Name: "app/cache/", Dir: true},
		testregistry.Entry{Name: "app/cache/old", Body: []byte("hidden by an opaque dir")},
	)
	upper := testregistry.Layer(t,
		testregistry.Entry{Name: "app/.wh.gone.txt"},
		testregistry.Entry{Name: "app/cache/.wh..wh..opq"},
		testregistry.Entry{Name: "app/cache/new", Body: []byte("new")},
		testregistry.Entry{Name: "app/hello-link.txt", Link: "app/hello.txt"},
	)
	digest := testregistry.Push(t, reg+"/t/app:1", testregistry.Image(t, []string{"GREETING=hi"}, base, lower, upper), "", "")

	a, b := &airlock.Tenant{ID: "tenant-a"}, &airlock.Tenant{ID: "tenant-b"}
	tp, err := f.svc.CreateTemplate(ctx, a, airlock.CreateTemplateRequest{Name: "app", FromImage: reg + "/t/app:1"})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Status != airlock.TemplateBuilding || tp.TenantID != a.ID {
		t.Fatalf("created %+v", tp)
	}
	tp = f.wait(t, a, "app")
	if tp.Status != airlock.TemplateReady {
		t.Fatalf("template failed: %s\n%s", tp.Reason, f.log(t, a, "app"))
	}
	if tp.Digest != digest || tp.SizeBytes <= 0 || tp.ImageHash == "" || tp.Workdir != "/app" {
		t.Errorf("ready template = %+v (pushed %s)", tp, digest)
	}
	img, err := f.svc.ResolveTemplate(ctx, a.ID, "app")
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != tp.ImageName() || !strings.Contains(strings.Join(img.Env, " "), "GREETING=hi") {
		t.Errorf("image = %+v", img)
	}
	root := img.Rootfs
	want := map[string]bool{"app/hello.txt": true, "app/gone.txt": false, "app/cache/old": false, "app/cache/new": true,
		"opt/airlock/bin/airlock-agent": true, "workspace": true, "usr/bin/bash": true}
	for p, exists := range want {
		if _, err := os.Lstat(filepath.Join(root, p)); (err == nil) != exists {
			t.Errorf("%s exists = %v, want %v", p, err == nil, exists)
		}
	}
	h1, _ := os.Stat(filepath.Join(root, "app/hello.txt"))
	h2, _ := os.Stat(filepath.Join(root, "app/hello-link.txt"))
	if h1 == nil || h2 == nil || !os.SameFile(h1, h2) {
		t.Errorf("app/hello-link.txt is not a hard link of app/hello.txt")
	}
	if pw, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(pw), "sandbox:x:1000:1000") {
		t.Errorf("no sandbox user in /etc/passwd:\n%s", pw)
	}
	logText := f.log(t, a, "app")
	for _, w := range []string{"pull " + reg, "(pulled)", "scan the rootfs", "ready: app"} {
		if !strings.Contains(logText, w) {
			t.Errorf("the build log lacks %q:\n%s", w, logText)
		}
	}

	// Private: tenant b sees nothing of a's template.
	if _, err := f.svc.ResolveTemplate(ctx, b.ID, "app"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b resolves a's template: %v", err)
	}
	if _, err := f.svc.TemplateLog(ctx, b, "app"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b reads a's log: %v", err)
	}
	if err := f.svc.DeleteTemplate(ctx, b, "app"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b deletes a's template: %v", err)
	}

	// The layer cache: a second image on the same base pulls one layer.
	before := layerFiles(t, f.state)
	extra := testregistry.Layer(t, testregistry.Entry{Name: "app/two.txt", Body: []byte("two")})
	testregistry.Push(t, reg+"/t/two:1", testregistry.Image(t, nil, base, lower, extra), "", "")
	if _, err := f.svc.CreateTemplate(ctx, nil, airlock.CreateTemplateRequest{Name: "two", FromImage: reg + "/t/two:1"}); err != nil {
		t.Fatal(err)
	}
	if tp := f.wait(t, nil, "two"); tp.Status != airlock.TemplateReady {
		t.Fatalf("operator template failed: %s", tp.Reason)
	}
	if got := layerFiles(t, f.state); got != before+1 {
		t.Errorf("layer cache holds %d blobs after the second import, want %d (the shared layers stored once)", got, before+1)
	}
	if l := f.log(t, nil, "two"); strings.Count(l, "(cached)") != 2 || strings.Count(l, "(pulled)") != 1 {
		t.Errorf("second import log: want 2 cached and 1 pulled layer:\n%s", l)
	}
	// Operator templates: visible to every tenant, not deletable by one.
	for _, tn := range []*airlock.Tenant{a, b} {
		if _, err := f.svc.ResolveTemplate(ctx, tn.ID, "two"); err != nil {
			t.Errorf("tenant %s cannot resolve the operator's template: %v", tn.ID, err)
		}
	}
	if err := f.svc.DeleteTemplate(ctx, b, "two"); airlock.ErrorCode(err) != airlock.EFORBIDDEN {
		t.Errorf("a tenant deleted the operator's template: %v", err)
	}

	// In use by a live session: refused; then deleted, directory gone.
	f.store.live[tp.ImageName()] = 1
	if err := f.svc.DeleteTemplate(ctx, a, "app"); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Errorf("delete of a template in use = %v, want conflict", err)
	}
	f.store.live[tp.ImageName()] = 0
	if err := f.svc.DeleteTemplate(ctx, a, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(root)); !os.IsNotExist(err) {
		t.Errorf("the template's directory is still there: %v", err)
	}
}

// TestImportPrivateRegistry: a registry behind htpasswd basic auth; no
// credential fails with a clear reason; the request's credential and the
// node's file both work; neither is stored in the template.
func TestImportPrivateRegistry(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{Username: "puller", Password: "s3cret-pw"})
	authFile := filepath.Join(t.TempDir(), "auth.json")
	os.WriteFile(authFile, []byte(`{"auths": {"`+reg+`": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("puller:s3cret-pw"))+`"}}}`), 0o600)
	f := newFixture(t, template.OCIConfig{InsecureRegistries: []string{reg}}, 0)
	withFile := newFixture(t, template.OCIConfig{InsecureRegistries: []string{reg}, AuthFile: authFile}, 0)
	ctx := context.Background()
	img := testregistry.Image(t, nil, testregistry.Layer(t, testregistry.Entry{Name: "secret.txt", Body: []byte("private")}))
	testregistry.Push(t, reg+"/private/app:1", img, "puller", "s3cret-pw")
	tn := &airlock.Tenant{ID: "t"}

	f.svc.CreateTemplate(ctx, tn, airlock.CreateTemplateRequest{Name: "anon", FromImage: reg + "/private/app:1"})
	if tp := f.wait(t, tn, "anon"); tp.Status != airlock.TemplateFailed || !strings.Contains(tp.Reason, "template-pull-failed") {
		t.Errorf("anonymous pull of a private image: %+v", tp)
	}
	f.svc.CreateTemplate(ctx, tn, airlock.CreateTemplateRequest{Name: "creds", FromImage: reg + "/private/app:1",
		RegistryAuth: &airlock.RegistryAuth{Username: "puller", Password: "s3cret-pw"}})
	tp := f.wait(t, tn, "creds")
	if tp.Status != airlock.TemplateReady {
		t.Fatalf("pull with the request's credential: %s", tp.Reason)
	}
	withFile.svc.CreateTemplate(ctx, tn, airlock.CreateTemplateRequest{Name: "node", FromImage: reg + "/private/app:1"})
	if tp := withFile.wait(t, tn, "node"); tp.Status != airlock.TemplateReady {
		t.Fatalf("pull with the node's credential: %s", tp.Reason)
	}
	for _, s := range []*memStore{f.store, withFile.store} {
		for _, x := range s.byID {
			if strings.Contains(strings.Join([]string{x.Reason, x.FromImage, strings.Join(x.Env, " ")}, " "), "s3cret") {
				t.Errorf("a credential is in template %+v", x)
			}
		}
	}
	if strings.Contains(f.log(t, tn, "creds"), "s3cret") {
		t.Error("the build log holds the password")
	}
}

// TestImportInsecureRefused: a plain-HTTP registry not named insecure is
// refused with a clear reason; a quota too small fails the build.
func TestImportInsecureRefused(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	img := testregistry.Image(t, nil, testregistry.Layer(t, testregistry.Entry{Name: "big.bin", Body: make([]byte, 256<<10)}))
	testregistry.Push(t, reg+"/t/x:1", img, "", "")
	ctx := context.Background()
	tn := &airlock.Tenant{ID: "t"}

	f := newFixture(t, template.OCIConfig{}, 0)
	f.svc.CreateTemplate(ctx, tn, airlock.CreateTemplateRequest{Name: "x", FromImage: reg + "/t/x:1"})
	if tp := f.wait(t, tn, "x"); tp.Status != airlock.TemplateFailed || !strings.Contains(tp.Reason, "--insecure-registry "+reg) {
		t.Errorf("plain HTTP to an unnamed registry: %+v", tp)
	}

	q := newFixture(t, template.OCIConfig{InsecureRegistries: []string{reg}}, 64<<10)
	q.svc.CreateTemplate(ctx, tn, airlock.CreateTemplateRequest{Name: "x", FromImage: reg + "/t/x:1"})
	if tp := q.wait(t, tn, "x"); tp.Status != airlock.TemplateFailed || !strings.Contains(tp.Reason, "template-quota-exceeded") {
		t.Errorf("a build over the quota: %+v", tp)
	}
}
