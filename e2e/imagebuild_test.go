package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
)

// A node whose state directory lacks python-ds serves from the start:
// it builds the image in the background, runs Python that needs nothing
// of it on base meanwhile, answers 503 image-building (with Retry-After)
// for code that does, and uses python-ds once it is built. The images
// and the debootstrap stages are hard-linked in from the shared state
// directory, so the build is the agent's install and the scan, not a
// debootstrap.
func TestImagesBuiltInBackground(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	base := testenv.Image(t, "base")
	testenv.Image(t, "python-ds") // its stage is in the shared state directory
	agent := testenv.Agent(t)
	dir, err := os.MkdirTemp("", "airlock-imagebuild-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-imagebuild-" + testenv.RandomID()
	var daemons []*daemon
	t.Cleanup(func() { crashCleanupParents(t, dir, []string{parent}, daemons) })
	images := filepath.Join(dir, "images")
	if err := os.MkdirAll(images, 0o700); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(testenv.StateDir(), "images")
	for _, src := range []string{filepath.Dir(base.Rootfs), filepath.Join(shared, "stages")} {
		if out, err := exec.Command("cp", "-al", src, images).CombinedOutput(); err != nil {
			t.Fatalf("cp -al %s: %v\n%s", src, err, out)
		}
	}

	args := append([]string{"--listen", "127.0.0.1:0", "--state-dir", dir, "--agent", agent, "--cgroup-parent", parent}, quiet...)
	d := startServing(t, buildAirlockd(t), args, nil)
	daemons = append(daemons, d)
	built := func() bool { return strings.Contains(d.logs(), `msg="image built" image=python-ds`) }
	key, err := os.ReadFile(filepath.Join(dir, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, d.url, strings.TrimSpace(string(key)))
	ctx := context.Background()

	light, err := c.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Python, Code: "import json\nprint(json.dumps(6 * 7))"})
	if err != nil {
		t.Fatalf("light Python while python-ds is built: %v", err)
	}
	if light.Stdout != "42\n" {
		t.Fatalf("stdout %q", light.Stdout)
	}
	heavy := airlock.ExecuteRequest{Language: airlock.Python, Code: "import numpy\nprint(numpy.arange(4).sum())"}
	_, herr := c.Execute(ctx, heavy)
	if built() {
		t.Logf("python-ds was built before the requests were answered (image %s); the stand-in was not exercised", light.Image)
	} else {
		if light.Image != "base" {
			t.Errorf("light Python ran on %q while python-ds was being built, want the stand-in base", light.Image)
		}
		var ce *client.Error
		if !errors.As(herr, &ce) || ce.Status != http.StatusServiceUnavailable || client.ProblemSlug(ce.Type) != airlock.ProblemImageBuilding || ce.RetryAfter <= 0 {
			t.Errorf("numpy while python-ds is being built: %v, want 503 %s with Retry-After", herr, airlock.ProblemImageBuilding)
		}
		resp, err := http.Get(d.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable && !built() {
			t.Errorf("/readyz %d while python-ds is being built, want 503", resp.StatusCode)
		}
	}

	waitFor(t, 10*time.Minute, "python-ds built in the background", built)
	waitFor(t, time.Minute, "airlockd /readyz", func() bool {
		resp, err := http.Get(d.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	e, err := c.Execute(ctx, heavy)
	if err != nil {
		t.Fatalf("numpy once python-ds is built: %v", err)
	}
	if e.Image != "python-ds" || e.Stdout != "6\n" {
		t.Fatalf("numpy once python-ds is built: image %q, stdout %q, stderr %q", e.Image, e.Stdout, e.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "image-build-python-ds.log")); err != nil {
		t.Errorf("the build's log: %v", err)
	}
}
