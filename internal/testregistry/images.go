package testregistry

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entry is one entry of a test layer: a regular file (Body), a
// directory (Dir), a symlink (Symlink) or a hard link (Link).
type Entry struct {
	Name    string
	Body    []byte
	Mode    int64
	Dir     bool
	Symlink string
	Link    string
}

// Layer makes a (gzip-compressed) layer of the entries, in order.
func Layer(t testing.TB, es ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		switch {
		case e.Dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.Symlink != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.Symlink, 0
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.Link, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if e.Dir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(e.Body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// MiniRootfs is a layer of a small merged-/usr Debian rootfs copied from
// baseRootfs (our base image): bash and cat with the libraries they
// load, /etc/passwd and /etc/group.
func MiniRootfs(t testing.TB, baseRootfs string) v1.Layer {
	t.Helper()
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(baseRootfs, p))
		if err != nil {
			t.Fatalf("mini rootfs from %s: %v", baseRootfs, err)
		}
		return b
	}
	lib := "usr/lib/x86_64-linux-gnu/"
	return Layer(t,
		Entry{Name: "etc/", Dir: true},
		Entry{Name: "etc/passwd", Body: []byte("root:x:0:0:root:/root:/bin/bash\n")},
		Entry{Name: "etc/group", Body: []byte("root:x:0:\n")},
		Entry{Name: "usr/", Dir: true},
		Entry{Name: "usr/bin/", Dir: true},
		Entry{Name: "usr/bin/bash", Body: read("usr/bin/bash"), Mode: 0o755},
		Entry{Name: "usr/bin/cat", Body: read("usr/bin/cat"), Mode: 0o755},
		Entry{Name: "usr/lib/", Dir: true},
		Entry{Name: lib, Dir: true},
		Entry{Name: lib + "libc.so.6", Body: read(lib + "libc.so.6"), Mode: 0o755},
		Entry{Name: lib + "libtinfo.so.6.4", Body: read(lib + "libtinfo.so.6.4")},
		Entry{Name: lib + "libtinfo.so.6", Symlink: "libtinfo.so.6.4"},
		Entry{Name: lib + "ld-linux-x86-64.so.2", Body: read(lib + "ld-linux-x86-64.so.2"), Mode: 0o755},
		Entry{Name: "usr/lib64/", Dir: true},
		Entry{Name: "usr/lib64/ld-linux-x86-64.so.2", Symlink: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		Entry{Name: "bin", Symlink: "usr/bin"},
		Entry{Name: "lib", Symlink: "usr/lib"},
		Entry{Name: "lib64", Symlink: "usr/lib64"},
	)
}

// Image makes a linux/amd64 image of the layers (lowest first) with env.
func Image(t testing.TB, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env, cf.Config.WorkingDir = env, "/app"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Push pushes img to ref (host:port/repo:tag) over plain HTTP, with basic
// auth when user is set, and returns its digest.
func Push(t testing.TB, ref string, img v1.Image, user, password string) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if user != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: user, Password: password})
	}
	if err := remote.Write(r, img, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
