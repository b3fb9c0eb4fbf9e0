package template_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// TestDockerfileFromRegistryImage: a Dockerfile whose FROM names a
// registry image (host:port/repo:tag) builds on it, pulled through the
// template import (a registry named insecure may be plain HTTP); its RUN
// runs in the image and a run from the template sees both. A rebuild
// reuses the unpacked image and its cached steps. The same image on a
// registry the operator did not name insecure is refused.
func TestDockerfileFromRegistryImage(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	other := testregistry.Start(t, testregistry.Options{})
	base := testenv.Image(t, "base").Rootfs
	sh, err := os.ReadFile(filepath.Join(base, "usr/bin/bash"))
	if err != nil {
		t.Fatal(err)
	}
	img := testregistry.Image(t, []string{"FROM_ENV=from-the-registry"},
		testregistry.MiniRootfs(t, base),
		testregistry.Layer(t, testregistry.Entry{Name: "usr/bin/sh", Body: sh, Mode: 0o755}, testregistry.Entry{Name: "opt/", Dir: true, Mode: 0o777}))
	testregistry.Push(t, reg+"/t/shell:1", img, "", "")
	testregistry.Push(t, other+"/t/shell:1", img, "", "")

	s := teststack.New(t, teststack.Options{Templates: &node.TemplatesConfig{InsecureRegistries: []string{reg}}})
	ctx := context.Background()
	a := s.NewTenant(t, "a")
	build := func(name, from string) (*airlock.Template, string) {
		t.Helper()
		_, err := a.Client.CreateTemplate(ctx, airlock.CreateTemplateRequest{Name: name,
			Dockerfile: "FROM " + from + "\nRUN echo \"built on $FROM_ENV\" > /opt/marker\nENV AFTER=yes\n"})
		if err != nil {
			t.Fatal(err)
		}
		var logText strings.Builder
		if err := a.Client.TemplateLogs(ctx, name, &logText); err != nil {
			t.Fatal(err)
		}
		tp, err := a.Client.Template(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return tp, logText.String()
	}

	tp, logText := build("fromreg", reg+"/t/shell:1")
	if tp.Status != airlock.TemplateReady {
		t.Fatalf("template %+v; log:\n%s", tp, logText)
	}
	if !strings.Contains(logText, "pull "+reg+"/t/shell:1") {
		t.Errorf("the log does not show the pull:\n%s", logText)
	}
	e, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "cat /opt/marker; echo $AFTER", Template: "fromreg"})
	if err != nil {
		t.Fatal(err)
	}
	if e.ExitCode != 0 || !strings.Contains(e.Stdout, "built on from-the-registry") || !strings.Contains(e.Stdout, "yes") {
		t.Fatalf("run from the template: exit %v stdout %q stderr %q", e.ExitCode, e.Stdout, e.Stderr)
	}

	// Again: the image is unpacked once, and the RUN is cached.
	tp, logText = build("fromreg2", reg+"/t/shell:1")
	if tp.Status != airlock.TemplateReady || !strings.Contains(logText, "unpacked before") || !strings.Contains(logText, "cached") {
		t.Fatalf("rebuild %+v; log:\n%s", tp, logText)
	}

	// A plain-HTTP registry the operator did not name.
	tp, logText = build("insecure", other+"/t/shell:1")
	if tp.Status != airlock.TemplateFailed || !strings.Contains(tp.Reason, "--insecure-registry "+other) || tp.FailedLine != 1 {
		t.Fatalf("FROM an unnamed plain-HTTP registry: %+v; log:\n%s", tp, logText)
	}
}
