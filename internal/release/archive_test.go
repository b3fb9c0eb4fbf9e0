package release_test

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestReleaseImage checks the OCI image archive scripts/release.sh
// wrote: one manifest named REPO:VERSION, the config (entrypoint, user,
// environment, port, volume, labels), and the layers' files: the
// binaries of the tarball (the same bytes), the docs, and what airlockd
// and `airlock image build` run (debootstrap with its keyring, gpgv,
// wget, CA certificates, mkfs.ext4). The Kubernetes manifests the release
// wrote, and the tarball's IMAGE file, pin this archive's digest.
func TestReleaseImage(t *testing.T) {
	rel := testRelease(t)
	img, digest := loadArchive(t, rel)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/airlockd" || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want /usr/local/bin/airlockd alone", c.Entrypoint, c.Cmd)
	}
	if c.User != "0:0" {
		t.Errorf("user %q, want 0:0 (airlockd runs runsc, which makes namespaces, mounts and cgroups)", c.User)
	}
	env := strings.Join(c.Env, "\n")
	for _, want := range []string{"AIRLOCK_STATE_DIR=/var/lib/airlock", "AIRLOCK_LISTEN=0.0.0.0:8080", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("env %q lacks %s", c.Env, want)
		}
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("ports %v, want 8080/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/var/lib/airlock"]; !ok {
		t.Errorf("volumes %v, want /var/lib/airlock", c.Volumes)
	}
	if c.Labels["org.opencontainers.image.version"] != rel.version || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("labels %v, platform %s/%s", c.Labels, cf.OS, cf.Architecture)
	}

	files := imageFiles(t, img)
	for _, b := range []string{"airlockd", "airlock", "airlock-agent", "runsc"} {
		want := sha256File(t, filepath.Join(rel.tree, "bin", b))
		got := files["usr/local/bin/"+b]
		if got.sum != want || got.mode&0o111 == 0 {
			t.Errorf("image's /usr/local/bin/%s: sha256 %.12s mode %o; the tarball's is %.12s", b, got.sum, got.mode, want)
		}
	}
	for _, f := range []string{
		"usr/share/doc/airlock/README.md",
		"usr/sbin/debootstrap",
		"usr/share/keyrings/debian-archive-keyring.gpg",
		"usr/bin/gpgv",
		"usr/bin/wget",
		"etc/ssl/certs/ca-certificates.crt",
		"usr/sbin/mkfs.ext4",
		"etc/os-release",
	} {
		if _, ok := files[f]; !ok {
			t.Errorf("the image lacks /%s", f)
		}
	}
	for f := range files {
		if strings.HasPrefix(f, "var/lib/apt/lists/") && !strings.HasSuffix(f, "/lock") && !strings.HasPrefix(f, "var/lib/apt/lists/partial") {
			t.Errorf("the image holds apt's package list %s (it changes from build to build)", f)
		}
	}

	// The manifests pin this image, by digest.
	ref := testRepo + ":" + rel.version + "@" + digest.String()
	pinned := regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*(\S*/airlockd\S*)\s*$`)
	n := 0
	err = filepath.WalkDir(filepath.Join(rel.dir, "kubernetes"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range pinned.FindAllSubmatch(b, -1) {
			n++
			if string(m[1]) != ref {
				t.Errorf("%s names image %s, want %s", p, m[1], ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Errorf("the release's manifests name airlockd's image %d times, want the init container and airlockd", n)
	}
	if b, err := os.ReadFile(filepath.Join(rel.tree, "IMAGE")); err != nil || strings.TrimSpace(string(b)) != ref {
		t.Errorf("the tarball's IMAGE is %q (%v), want %s", b, err, ref)
	}
	if b, err := os.ReadFile(filepath.Join(rel.tree, "kubernetes", "airlockd.yaml")); err != nil || !strings.Contains(string(b), ref) {
		t.Errorf("the tarball's kubernetes/airlockd.yaml does not name %s (%v)", ref, err)
	}
}

// loadArchive unpacks the release's OCI archive and returns its one
// image and the image's manifest digest.
func loadArchive(t *testing.T, rel *dist) (v1.Image, v1.Hash) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(rel.archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			t.Fatalf("archive entry %q leaves the layout", h.Name)
		}
		p := filepath.Join(dir, name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(w, tr)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
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
	if len(im.Manifests) != 1 {
		t.Fatalf("the archive holds %d manifests, want 1", len(im.Manifests))
	}
	if got, want := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"], testRepo+":"+rel.version; got != want {
		t.Errorf("the archive names its image %q, want %q", got, want)
	}
	digest := im.Manifests[0].Digest
	img, err := p.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := img.Digest(); err != nil || got != digest {
		t.Fatalf("the manifest's digest is %v (%v), the index says %v", got, err, digest)
	}
	return img, digest
}

type imageFile struct {
	sum  string // hex sha256 of a regular file
	mode int64
}

// imageFiles lists every path of the image's layers (the last layer's
// entry wins), with the sha256 of regular files.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Errorf("%d layers, want 2 (Debian's base, Airlock's files)", len(layers))
	}
	files := map[string]imageFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			f := imageFile{mode: h.Mode}
			if h.Typeflag == tar.TypeReg {
				s := sha256.New()
				if _, err := io.Copy(s, tr); err != nil {
					t.Fatal(err)
				}
				f.sum = hex.EncodeToString(s.Sum(nil))
			}
			files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = f
		}
		rc.Close()
	}
	return files
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := sha256.New()
	if _, err := io.Copy(s, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(s.Sum(nil))
}
