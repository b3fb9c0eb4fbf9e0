package disk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

var _ airlock.Blobs = (*Dir)(nil)

const (
	blobsDir = "blobs"
	tmpDir   = "tmp"

	// staleTemp is the age after which New removes a temporary file left
	// by a crashed Put.
	staleTemp = time.Hour
)

// Config configures New.
type Config struct {
	// Dir is the directory that holds the blobs; it is created (0700) if
	// missing.
	Dir string
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return airlock.Errorf(airlock.EINVALID, "blobdir: directory is required")
	case strings.ContainsRune(c.Dir, 0):
		return airlock.Errorf(airlock.EINVALID, "blobdir: directory must not contain NUL")
	}
	return nil
}

// Dir stores blobs as files under one directory.
type Dir struct {
	root *os.Root
}

// New opens (creating if needed) the blob directory, and removes temporary
// files older than an hour, left by a crash during Put.
func New(cfg Config) (*Dir, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("blobdir: %w", err)
	}
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("blobdir: %w", err)
	}
	for _, d := range []string{blobsDir, tmpDir} {
		if err := root.MkdirAll(d, 0o700); err != nil {
			root.Close()
			return nil, fmt.Errorf("blobdir: %w", err)
		}
	}
	d := &Dir{root: root}
	if err := d.removeStaleTemps(time.Now().Add(-staleTemp)); err != nil {
		root.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory handle. Methods called after Close fail.
func (d *Dir) Close() error { return d.root.Close() }

func (d *Dir) removeStaleTemps(before time.Time) error {
	entries, err := fs.ReadDir(d.root.FS(), tmpDir)
	if err != nil {
		return fmt.Errorf("blobdir: %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(before) {
			continue
		}
		if err := d.root.Remove(path.Join(tmpDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blobdir: remove stale temp: %w", err)
		}
	}
	return nil
}

// Put stores the bytes of r under key, replacing any blob there, and
// returns how many it wrote. The blob appears whole or not at all: on any
// error (including r's and ctx's) nothing is left behind. A key that is a
// directory of other keys, or that runs through another blob, is ECONFLICT.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	tmp, f, err := d.createTemp()
	if err != nil {
		return 0, err
	}
	n, err := d.fill(ctx, f, r)
	if err == nil {
		err = d.publish(tmp, key)
	}
	if err != nil {
		d.root.Remove(tmp)
		return 0, err
	}
	return n, nil
}

// createTemp creates a new, empty temporary file under tmp/.
func (d *Dir) createTemp() (string, *os.File, error) {
	for range 10 {
		var b [16]byte
		rand.Read(b[:])
		name := path.Join(tmpDir, hex.EncodeToString(b[:]))
		f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("blobdir: create temp: %w", err)
		}
		return name, f, nil
	}
	return "", nil, errors.New("blobdir: create temp: too many collisions")
}

// fill copies r into f, syncs and closes f.
func (d *Dir) fill(ctx context.Context, f *os.File, r io.Reader) (int64, error) {
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("blobdir: write: %w", err)
	}
	return n, nil
}

// publish renames the temporary file to the key's path and syncs the
// directory, so the rename survives a crash.
func (d *Dir) publish(tmp, key string) error {
	name := path.Join(blobsDir, key)
	parent := path.Dir(name)
	if err := d.root.MkdirAll(parent, 0o700); err != nil {
		return d.pathError(key, err)
	}
	if err := d.root.Rename(tmp, name); err != nil {
		return d.pathError(key, err)
	}
	dir, err := d.root.Open(parent)
	if err != nil {
		return fmt.Errorf("blobdir: sync dir: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("blobdir: sync dir: %w", err)
	}
	return nil
}

// pathError maps the errors of a key that collides with the directory
// structure of other keys ("a" a blob and "a/b" wanted, or the reverse).
func (d *Dir) pathError(key string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) ||
		errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return &airlock.Error{Code: airlock.ECONFLICT, Type: "blob-key-conflict",
			Message: fmt.Sprintf("blob key %q conflicts with another blob key", key), Err: err}
	}
	return fmt.Errorf("blobdir: put %s: %w", key, err)
}

// Open returns the blob stored under key (an *os.File) and its size. The
// caller closes it. A missing blob is ErrNotFound.
func (d *Dir) Open(ctx context.Context, key string) (io.ReadSeekCloser, int64, error) {
	if err := ValidateKey(key); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f, err := d.root.Open(path.Join(blobsDir, key))
	if isNotExist(err) {
		return nil, 0, notFound(key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blobdir: open %s: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blobdir: open %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, notFound(key)
	}
	return f, fi.Size(), nil
}

// Delete removes the blob stored under key. A missing blob is not an error.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := path.Join(blobsDir, key)
	fi, err := d.root.Lstat(name)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobdir: delete %s: %w", key, err)
	}
	if fi.IsDir() {
		return nil // a prefix of other keys, not a blob
	}
	if err := d.root.Remove(name); err != nil && !isNotExist(err) {
		return fmt.Errorf("blobdir: delete %s: %w", key, err)
	}
	return nil
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func notFound(key string) error {
	return fmt.Errorf("blob %s: %w", key, airlock.ErrNotFound)
}

// ctxReader stops a copy when its context ends.
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
