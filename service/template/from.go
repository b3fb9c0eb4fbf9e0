package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// BaseImages unpacks registry images that a Dockerfile's FROM names
// (host:port/repo:tag) into root filesystems for its build, through the
// same import as from_image: the node's insecure-registry rules and
// credentials, the layer cache and the safe unpacker. One rootfs is kept
// per manifest digest, under StateDir/templates/from/<hex>/rootfs, so
// that a rebuild from the same image finds its steps cached.
type BaseImages struct {
	build    Builder
	dir      string
	scratch  string
	maxBytes int64
	maxFiles int64
	mu       sync.Mutex
}

// NewBaseImages returns the FROM importer of a state directory over the
// OCI import builder (NewOCIBuilder); maxBytes and maxFiles bound one
// image (0: the package's defaults).
func NewBaseImages(stateDir string, oci Builder, maxBytes, maxFiles int64) (*BaseImages, error) {
	state, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	b := &BaseImages{build: oci, dir: filepath.Join(state, "templates", "from"), scratch: filepath.Join(state, "templates", ".tmp"),
		maxBytes: maxBytes, maxFiles: maxFiles}
	for _, d := range []string{b.dir, b.scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The gofer of a build step must traverse to the rootfs.
	return b, os.Chmod(b.dir, 0o755)
}

// IsRegistryRef reports whether a FROM reference names a registry image
// rather than one of our images or a template, whose names hold neither
// '/' nor ':'.
func IsRegistryRef(ref string) bool { return strings.ContainsAny(ref, "/:") }

// Resolve pulls ref and returns it as an image (its rootfs, the manifest
// digest as its hash, its environment), writing progress to log.
func (b *BaseImages) Resolve(ctx context.Context, ref string, log io.Writer) (*airlock.Image, error) {
	if log == nil {
		log = io.Discard
	}
	id := "from-" + airlock.NewID()
	tmp := filepath.Join(b.scratch, id)
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res, err := b.build(ctx, &BuildRequest{
		Template: airlock.Template{ID: id, Name: "from", Source: airlock.TemplateFromImage, FromImage: ref},
		Request:  airlock.CreateTemplateRequest{FromImage: ref}, MaxBytes: b.maxBytes, MaxFiles: b.maxFiles,
	}, log, rootfs)
	if err != nil {
		return nil, err
	}
	hex, ok := strings.CutPrefix(res.Digest, "sha256:")
	if !ok || len(hex) != 64 || strings.ContainsAny(hex, "/.") {
		return nil, fmt.Errorf("registry image %s: unexpected digest %q", ref, res.Digest)
	}
	final := filepath.Join(b.dir, hex)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := os.Stat(filepath.Join(final, "rootfs")); errors.Is(err, os.ErrNotExist) {
		if err := os.Chmod(tmp, 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, final); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "registry image %s unpacked as %s\n", ref, res.Digest)
	} else {
		fmt.Fprintf(log, "registry image %s: %s unpacked before; using it\n", ref, res.Digest)
	}
	// Its last use, for the garbage collector (gc_cache.go).
	now := time.Now()
	os.Chtimes(final, now, now)
	return &airlock.Image{Name: ref, Hash: hex, Rootfs: filepath.Join(final, "rootfs"), Env: res.Env}, nil
}
