package template

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"github.com/airlockhq/airlock"
)

// OCIConfig configures the OCI import builder.
type OCIConfig struct {
	// StateDir is the node's state directory: the layer cache is
	// StateDir/templates/layers.
	StateDir string
	// InsecureRegistries (host:port) may be reached over plain HTTP;
	// every other registry is HTTPS only.
	InsecureRegistries []string
	// AuthFile holds the node's registry credentials, Docker
	// config.json style: {"auths": {"host:port": {"auth": base64
	// "user:password"} or {"username", "password"}}}. Read at every pull.
	AuthFile string
	// Transport is the HTTP transport of registry requests (nil: a clone
	// of http.DefaultTransport).
	Transport http.RoundTripper
}

// ProblemPull is the problem type of a registry pull that failed.
const ProblemPull = "template-pull-failed"

// NewOCIBuilder returns the Builder of TemplateFromImage and
// TemplateFromArchive.
func NewOCIBuilder(cfg OCIConfig) (Builder, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("oci builder: no state directory")
	}
	for _, r := range cfg.InsecureRegistries {
		if _, err := name.NewRegistry(r, name.StrictValidation); err != nil || strings.Contains(r, "/") {
			return nil, fmt.Errorf("oci builder: insecure registry %q is not host:port", r)
		}
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	o := &ociBuilder{cfg: cfg, layers: filepath.Join(state, "templates", "layers", "sha256"), scratch: filepath.Join(state, "templates", ".tmp")}
	if err := os.MkdirAll(o.layers, 0o700); err != nil {
		return nil, err
	}
	return o.build, nil
}

type ociBuilder struct {
	cfg     OCIConfig
	layers  string
	scratch string
}

// LayerCacheDir returns where a state directory's layer cache is.
func LayerCacheDir(stateDir string) string {
	return filepath.Join(stateDir, "templates", "layers", "sha256")
}

func (o *ociBuilder) build(ctx context.Context, req *BuildRequest, log io.Writer, rootfs string) (*BuildResult, error) {
	var img v1.Image
	var err error
	switch req.Template.Source {
	case airlock.TemplateFromImage:
		img, err = o.pull(ctx, req, log)
	case airlock.TemplateFromArchive:
		var cleanup func()
		img, cleanup, err = o.archive(req.ContextPath, req.Template.ID, log)
		if cleanup != nil {
			defer cleanup()
		}
	default:
		return nil, ErrNoBuilder
	}
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, pullErr(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, pullErr(err)
	}
	if cf.OS != "" && cf.OS != "linux" {
		return nil, airlock.Problem(airlock.EUNPROCESSABLE, "template-platform", "the image is for %s/%s; only linux images run here", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, pullErr(err)
	}
	fmt.Fprintf(log, "image %s: %d layers\n", digest, len(layers))
	u, err := newUnpacker(rootfs, req.MaxBytes, req.MaxFiles, log)
	if err != nil {
		return nil, err
	}
	defer u.Close()
	var digests []string
	for i, l := range layers {
		path, cached, err := o.cache(ctx, l, req.MaxBytes)
		if err != nil {
			return nil, err
		}
		d, _ := l.Digest()
		digests = append(digests, d.String())
		how := "pulled"
		if cached {
			how = "cached"
		}
		fmt.Fprintf(log, "layer %d/%d %s (%s)\n", i+1, len(layers), d, how)
		if err := o.apply(u, path); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(log, "unpacked %d files, %d bytes; %d device files dropped\n", u.files, u.bytes, u.dropped)
	res := &BuildResult{Digest: digest.String(), Env: cf.Config.Env, Workdir: cf.Config.WorkingDir, User: cf.Config.User, Layers: digests}
	return res, nil
}

// pull resolves the request's reference in its registry.
func (o *ociBuilder) pull(ctx context.Context, req *BuildRequest, log io.Writer) (v1.Image, error) {
	var opts []name.Option
	ref0, err := name.ParseReference(req.Request.FromImage, name.StrictValidation)
	if err != nil {
		return nil, airlock.Problem(airlock.EINVALID, "invalid-image-reference", "from_image %q is not an image reference: %v", req.Request.FromImage, err)
	}
	reg := ref0.Context().RegistryStr()
	insecure := slices.Contains(o.cfg.InsecureRegistries, reg)
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(req.Request.FromImage, append(opts, name.StrictValidation)...)
	if err != nil {
		return nil, err
	}
	auth, how, err := o.auth(reg, req.Request.RegistryAuth)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "pull %s from %s (%s)\n", ref, reg, how)
	var tr http.RoundTripper = o.cfg.Transport
	if !insecure {
		tr = httpsOnly{reg: reg, next: tr}
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(tr),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		return nil, pullErr(err)
	}
	return img, nil
}

// httpsOnly refuses plain HTTP to a registry the operator did not name
// insecure.
type httpsOnly struct {
	reg  string
	next http.RoundTripper
}

func (h httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		return nil, airlock.Problem(airlock.EUNPROCESSABLE, "registry-insecure",
			"registry %s answers only over plain HTTP, which is refused unless the operator names it (airlockd --insecure-registry %s)", h.reg, h.reg)
	}
	return h.next.RoundTrip(r)
}

// auth picks the request's credential, else the node's for the registry,
// else anonymous.
func (o *ociBuilder) auth(reg string, a *airlock.RegistryAuth) (authn.Authenticator, string, error) {
	if a != nil {
		return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password}), "the request's credential", nil
	}
	if o.cfg.AuthFile != "" {
		b, err := os.ReadFile(o.cfg.AuthFile)
		if err != nil {
			return nil, "", fmt.Errorf("registry credentials: %w", err)
		}
		var f struct {
			Auths map[string]struct {
				Auth     string `json:"auth"`
				Username string `json:"username"`
				Password string `json:"password"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, "", fmt.Errorf("registry credentials %s: %w", o.cfg.AuthFile, err)
		}
		if e, ok := f.Auths[reg]; ok {
			user, pass := e.Username, e.Password
			if e.Auth != "" {
				raw, err := base64.StdEncoding.DecodeString(e.Auth)
				if err != nil {
					return nil, "", fmt.Errorf("registry credentials %s: %s: auth is not base64", o.cfg.AuthFile, reg)
				}
				user, pass, _ = strings.Cut(string(raw), ":")
			}
			return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), "the node's credential", nil
		}
	}
	return authn.Anonymous, "anonymous", nil
}

// pullErr turns a registry or image error into a problem.
func pullErr(err error) error {
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	return airlock.Problem(airlock.EUNPROCESSABLE, ProblemPull, "pulling the image failed: %v", err)
}

// archive opens an uploaded docker save archive or OCI layout (a tar).
func (o *ociBuilder) archive(path, id string, log io.Writer) (v1.Image, func(), error) {
	if path == "" {
		return nil, nil, airlock.Problem(airlock.EINVALID, "invalid-template-source", "no context to import")
	}
	kind, err := archiveKind(path)
	if err != nil {
		return nil, nil, err
	}
	switch kind {
	case "docker":
		fmt.Fprintf(log, "import docker save archive\n")
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, nil, refuse("the docker save archive: %v", err)
		}
		return img, nil, nil
	}
	fmt.Fprintf(log, "import OCI layout\n")
	dir := filepath.Join(o.scratch, "oci-"+id)
	cleanup := func() { os.RemoveAll(dir) }
	if err := extractLayout(path, dir); err != nil {
		cleanup()
		return nil, nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		cleanup()
		return nil, nil, refuse("the OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		cleanup()
		return nil, nil, refuse("the OCI layout has no image")
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		cleanup()
		return nil, nil, refuse("the OCI layout's first manifest is not an image: %v", err)
	}
	return img, cleanup, nil
}

// archiveKind tells a docker save archive (manifest.json) from an OCI
// layout (index.json and oci-layout).
func archiveKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", refuse("the context is not a tar: %v", err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "manifest.json":
			return "docker", nil
		case "index.json", "oci-layout":
			return "oci", nil
		}
	}
	return "", refuse("the context is neither a docker save archive (manifest.json) nor an OCI layout (index.json)")
}

// extractLayout unpacks an OCI layout tar (regular files and directories
// only, names checked) into dir.
func extractLayout(path, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	u, err := newUnpacker(dir, 0, 100_000, io.Discard)
	if err != nil {
		return err
	}
	defer u.Close()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refuse("the OCI layout is not a readable tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			continue
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		h.Mode = 0o600
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o700
		}
		if err := u.entry(tr, h, rel); err != nil {
			return err
		}
	}
}

// cache returns the path of the layer's compressed blob in the cache,
// fetching it first if it is not there; a blob is stored once per digest
// and checked against it.
func (o *ociBuilder) cache(ctx context.Context, l v1.Layer, maxBytes int64) (string, bool, error) {
	d, err := l.Digest()
	if err != nil {
		return "", false, pullErr(err)
	}
	if d.Algorithm != "sha256" || len(d.Hex) != 64 {
		return "", false, refuse("layer digest %s is not sha256", d)
	}
	path := filepath.Join(o.layers, d.Hex)
	if _, err := os.Stat(path); err == nil {
		return path, true, nil
	}
	if size, err := l.Size(); err == nil && maxBytes > 0 && size > maxBytes {
		return "", false, airlock.Problem(airlock.ETOOLARGE, ProblemTooLarge, "layer %s is %d bytes, over the limit of %d bytes", d, size, maxBytes)
	}
	rc, err := l.Compressed()
	if err != nil {
		return "", false, pullErr(err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(o.layers, ".pull-")
	if err != nil {
		return "", false, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	limit := int64(1<<62 - 1)
	if maxBytes > 0 {
		limit = maxBytes
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(ctxReader{ctx, rc}, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, pullErr(err)
	}
	if n > limit {
		return "", false, airlock.Problem(airlock.ETOOLARGE, ProblemTooLarge, "layer %s is over the limit of %d bytes", d, maxBytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Hex {
		return "", false, refuse("layer %s: its content has digest sha256:%s", d, got)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, err
	}
	return path, false, nil
}

// apply decompresses a cached layer and unpacks it.
func (o *ociBuilder) apply(u *unpacker, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var head [4]byte
	n, _ := io.ReadFull(f, head[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var r io.Reader = f
	switch {
	case n >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(f)
		if err != nil {
			return refuse("a layer is not valid gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	case n == 4 && bytes.Equal(head[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(f)
		if err != nil {
			return refuse("a layer is not valid zstd: %v", err)
		}
		defer zr.Close()
		r = zr
	}
	return u.layer(r)
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
