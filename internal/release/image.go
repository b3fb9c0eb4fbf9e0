package release

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinDir is where the image holds the binaries (the units and manifests
// run /usr/local/bin/airlockd).
const BinDir = "/usr/local/bin"

// DocDir is where the image holds the docs.
const DocDir = "/usr/share/doc/airlock"

// ImageConfig says what goes into the image.
type ImageConfig struct {
	// Base is a root file system directory (a debootstrap of Debian with
	// what airlockd and `airlock image build` run: debootstrap,
	// e2fsprogs, ...): the first layer.
	Base string
	// Bins are files copied to BinDir (mode 0755), by their base name.
	Bins []string
	// Docs are files copied to DocDir (mode 0644), by their base name.
	Docs []string
	// Version labels the image and is its tag.
	Version string
	// Repo, if set, is the repository the image is named in: the
	// archive's manifest is then named Repo:Version, the name `podman
	// load` gives it (with only a tag, podman names the image
	// localhost/<tag>:latest).
	Repo string
	// Created is the image's creation time (zero: the Unix epoch, so the
	// same inputs give the same digest).
	Created time.Time
}

// Entrypoint is the image's entrypoint.
var Entrypoint = []string{BinDir + "/airlockd"}

// BuildImage makes the image and writes it as an OCI image archive to
// out; it returns the image's manifest digest ("sha256:...").
func BuildImage(cfg ImageConfig, out string) (v1.Hash, error) {
	if cfg.Base == "" || cfg.Version == "" {
		return v1.Hash{}, fmt.Errorf("release: ImageConfig needs Base and Version")
	}
	refName := cfg.Version
	if cfg.Repo != "" {
		refName = cfg.Repo + ":" + cfg.Version
		if _, err := name.NewTag(refName, name.StrictValidation); err != nil {
			return v1.Hash{}, fmt.Errorf("release: image name %q: %w", refName, err)
		}
	}
	base, err := dirLayer(cfg.Base, cfg.Created)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("base layer: %w", err)
	}
	var files []fileEntry
	for _, b := range cfg.Bins {
		files = append(files, fileEntry{src: b, dst: path.Join(BinDir, filepath.Base(b)), mode: 0o755})
	}
	for _, d := range cfg.Docs {
		files = append(files, fileEntry{src: d, dst: path.Join(DocDir, filepath.Base(d)), mode: 0o644})
	}
	app, err := filesLayer(files, cfg.Created)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("airlock layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{CreatedBy: "debootstrap --variant=minbase (scripts/release.sh)", Created: v1.Time{Time: cfg.Created}}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{CreatedBy: "airlock " + cfg.Version + ": binaries and docs", Created: v1.Time{Time: cfg.Created}}},
	)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: cfg.Created}
	cf.Config.Entrypoint = Entrypoint
	cf.Config.Cmd = nil
	// root: airlockd runs runsc, which makes namespaces, mounts and
	// cgroups (see deploy/kubernetes/airlockd.yaml).
	cf.Config.User = "0:0"
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"AIRLOCK_STATE_DIR=/var/lib/airlock", "AIRLOCK_LISTEN=0.0.0.0:8080"}
	cf.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	cf.Config.Volumes = map[string]struct{}{"/var/lib/airlock": {}}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "airlockd",
		"org.opencontainers.image.version": cfg.Version,
		"org.opencontainers.image.source":  "https://github.com/airlockhq/airlock",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeArchive(img, refName, out); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// writeArchive writes img as an OCI layout in a tar at out, its manifest
// named refName (org.opencontainers.image.ref.name): `podman load` names
// the image after it, and `skopeo copy oci-archive:FILE:REFNAME` selects
// it.
func writeArchive(img v1.Image, refName, out string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": refName,
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

type fileEntry struct {
	src, dst string
	mode     int64
}

// filesLayer is a layer holding files at their destinations, with their
// parent directories.
func filesLayer(files []fileEntry, mtime time.Time) (v1.Layer, error) {
	for _, f := range files {
		if _, err := os.Stat(f.src); err != nil {
			return nil, err
		}
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			err := func() error {
				dirs := map[string]bool{}
				for _, f := range files {
					var parents []string
					for d := path.Dir(f.dst); d != "/" && !dirs[d]; d = path.Dir(d) {
						parents = append([]string{d}, parents...)
						dirs[d] = true
					}
					for _, d := range parents {
						if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: mtime}); err != nil {
							return err
						}
					}
					if err := writeFile(tw, f.src, strings.TrimPrefix(f.dst, "/"), f.mode, mtime); err != nil {
						return err
					}
				}
				return tw.Close()
			}()
			pw.CloseWithError(err)
		}()
		return pr, nil
	}, tarball.WithMediaType(types.OCILayer))
}

func writeFile(tw *tar.Writer, src, name string, mode int64, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: mode, ModTime: mtime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// dirLayer is a layer holding the tree under root as the image's root:
// regular files, directories, symlinks, hard links and device nodes,
// with their modes and owners, in a fixed order.
func dirLayer(root string, mtime time.Time) (v1.Layer, error) {
	if fi, err := os.Stat(root); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(writeTree(pw, root, mtime))
		}()
		return pr, nil
	}, tarball.WithMediaType(types.OCILayer))
}

func writeTree(w io.Writer, root string, mtime time.Time) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, inode) -> first name, for hard links
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			name := path.Join(rel, e.Name())
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			h.Name, h.ModTime, h.AccessTime, h.ChangeTime = name, mtime, time.Time{}, time.Time{}
			h.Uname, h.Gname = "", ""
			h.Format = tar.FormatPAX
			st, _ := fi.Sys().(*syscall.Stat_t)
			if st != nil {
				h.Uid, h.Gid = int(st.Uid), int(st.Gid)
			}
			if fi.Mode().IsRegular() && st != nil && st.Nlink > 1 {
				k := [2]uint64{st.Dev, st.Ino}
				if first, ok := links[k]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
					if err := tw.WriteHeader(h); err != nil {
						return err
					}
					continue
				}
				links[k] = name
			}
			if fi.IsDir() {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			switch {
			case fi.Mode().IsRegular():
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				_, err = io.Copy(tw, f)
				f.Close()
				if err != nil {
					return err
				}
			case fi.IsDir():
				if err := walk(p, name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return err
	}
	return tw.Close()
}

// Ref is the image reference the manifests name: repo:version@digest.
func Ref(repo, version string, digest v1.Hash) (string, error) {
	ref := repo + ":" + version + "@" + digest.String()
	if _, err := name.NewDigest(ref); err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return ref, nil
}
