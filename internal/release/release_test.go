package release_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/airlockhq/airlock/internal/release"
)

// TestBuildImage builds an image from a small base tree and checks the
// archive as podman or skopeo would read it: one manifest named by the
// version, the config (entrypoint, user, port, labels) and the layers'
// files (the binaries in /usr/local/bin, the base tree with its links).
func TestBuildImage(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	for _, d := range []string{"usr/bin", "etc"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "usr/bin/debootstrap"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(base, "etc/os-release"), []byte("ID=debian\n"), 0o644)
	os.Link(filepath.Join(base, "etc/os-release"), filepath.Join(base, "etc/os-release.hard"))
	os.Symlink("usr/bin", filepath.Join(base, "bin"))
	var bins []string
	for _, b := range []string{"airlockd", "airlock", "airlock-agent", "runsc"} {
		p := filepath.Join(dir, b)
		os.WriteFile(p, []byte("ELF "+b), 0o600)
		bins = append(bins, p)
	}
	doc := filepath.Join(dir, "README.md")
	os.WriteFile(doc, []byte("# Airlock\n"), 0o600)

	out := filepath.Join(dir, "airlockd-1.2.3.oci.tar")
	digest, err := release.BuildImage(release.ImageConfig{Base: base, Bins: bins, Docs: []string{doc}, Version: "1.2.3", Repo: "reg.test/airlockhq/airlockd"}, out)
	if err != nil {
		t.Fatal(err)
	}
	again, err := release.BuildImage(release.ImageConfig{Base: base, Bins: bins, Docs: []string{doc}, Version: "1.2.3", Repo: "reg.test/airlockhq/airlockd"}, filepath.Join(dir, "again.oci.tar"))
	if err != nil || again != digest {
		t.Errorf("the same inputs gave digest %v (%v), then %v: want the same", digest, err, again)
	}

	// Unpack the archive into an OCI layout and read it back.
	lay := filepath.Join(dir, "layout")
	untar(t, out, lay)
	p, err := layout.FromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "reg.test/airlockhq/airlockd:1.2.3" {
		t.Fatalf("index = %+v, want one manifest %v named reg.test/airlockhq/airlockd:1.2.3", im.Manifests, digest)
	}
	img, err := p.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := img.MediaType()
	if mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/airlockd" || c.User != "0:0" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config: entrypoint %q user %q %s/%s", c.Entrypoint, c.User, cf.OS, cf.Architecture)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || c.Labels["org.opencontainers.image.version"] != "1.2.3" {
		t.Errorf("config: ports %v labels %v", c.ExposedPorts, c.Labels)
	}
	if !strings.Contains(strings.Join(c.Env, " "), "AIRLOCK_LISTEN=0.0.0.0:8080") {
		t.Errorf("config env %v: airlockd must listen beyond the container's loopback", c.Env)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (%v), want base and airlock", len(layers), err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = h
		}
		rc.Close()
	}
	for _, want := range []struct {
		name string
		typ  byte
		mode int64
	}{
		{"usr/local/bin/airlockd", tar.TypeReg, 0o755},
		{"usr/local/bin/airlock", tar.TypeReg, 0o755},
		{"usr/local/bin/airlock-agent", tar.TypeReg, 0o755},
		{"usr/local/bin/runsc", tar.TypeReg, 0o755},
		{"usr/share/doc/airlock/README.md", tar.TypeReg, 0o644},
		{"usr/bin/debootstrap", tar.TypeReg, 0o755},
		{"etc/os-release", tar.TypeReg, 0o644},
		{"etc/os-release.hard", tar.TypeLink, 0o644},
		{"bin", tar.TypeSymlink, 0o777},
	} {
		h := files[want.name]
		if h == nil {
			t.Errorf("image lacks %s", want.name)
			continue
		}
		if h.Typeflag != want.typ || h.Mode&0o7777 != want.mode {
			t.Errorf("%s: type %c mode %o, want %c %o", want.name, h.Typeflag, h.Mode&0o7777, want.typ, want.mode)
		}
	}
}

func TestBuildImageRefusesBadRepo(t *testing.T) {
	dir := t.TempDir()
	_, err := release.BuildImage(release.ImageConfig{Base: dir, Version: "1", Repo: "Bad Repo"}, filepath.Join(dir, "x.tar"))
	if err == nil {
		t.Fatal("an image named \"Bad Repo:1\" was written")
	}
}

func TestBuildImageNeedsBase(t *testing.T) {
	_, err := release.BuildImage(release.ImageConfig{Base: filepath.Join(t.TempDir(), "none"), Version: "1"}, filepath.Join(t.TempDir(), "x.tar"))
	if err == nil {
		t.Fatal("an image without its base tree was built")
	}
}

func TestPinManifests(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "external"), 0o755)
	os.WriteFile(filepath.Join(src, "airlockd.yaml"), []byte("spec:\n  initContainers:\n    - name: images\n      image: registry.example.com/airlockhq/airlockd:0.1.0\n  containers:\n    - image: registry.example.com/airlockhq/airlockd:0.1.0\n      name: airlockd\n"), 0o644)
	os.WriteFile(filepath.Join(src, "etcd.yaml"), []byte("      image: registry.k8s.io/etcd:3.5\n"), 0o644)
	os.WriteFile(filepath.Join(src, "external", "x.yaml"), []byte("kind: Service\n"), 0o644)
	ref := "reg.test/a/airlockd:1.2.3@sha256:" + strings.Repeat("ab", 32)
	n, err := release.PinManifests(src, dst, ref)
	if err != nil || n != 2 {
		t.Fatalf("PinManifests = %d, %v; want 2", n, err)
	}
	b, _ := os.ReadFile(filepath.Join(dst, "airlockd.yaml"))
	if strings.Count(string(b), "image: "+ref+"\n") != 2 || strings.Contains(string(b), "0.1.0") {
		t.Errorf("pinned manifest:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etcd.yaml")); !strings.Contains(string(b), "registry.k8s.io/etcd:3.5") {
		t.Errorf("etcd's image changed:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(dst, "external", "x.yaml")); err != nil {
		t.Error(err)
	}
	if _, err := release.PinManifests(filepath.Join(dst, "external"), t.TempDir(), ref); err == nil {
		t.Error("manifests without airlockd's image pinned nothing and did not fail")
	}
}

func TestRealManifestsPin(t *testing.T) {
	n, err := release.PinManifests("../../deploy/kubernetes", t.TempDir(), "reg.test/airlockd:1@sha256:"+strings.Repeat("0", 64))
	if err != nil || n < 2 {
		t.Fatalf("deploy/kubernetes: pinned %d (%v), want the init container and airlockd", n, err)
	}
}

func untar(t *testing.T, archive, dst string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}
