package template

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/airlockhq/airlock"
)

// Templates in the fleet's object store.
//
// A node with a shared object store (Config.Blobs) uploads every template
// it publishes: its directory (rootfs/ and template.json) as one tar,
// compressed with zstd, under airlock.TemplateBlobKey(ID, digest), and
// records the archive's digest in the template's record (BlobDigest). A
// node asked for a template it does not hold pulls that archive the
// first time: one pull per template at a time (concurrent requests wait
// for it), unpacked by the same unpacker as OCI layers (no escape, no
// devices, bounded) into .tmp and renamed into place only when the
// object's digest is the recorded one. From then on the node serves it
// like a template it built.
//
// Left out of the archive: the base snapshot (each node makes its own of
// the rootfs, as it does for images: a checkpoint belongs to the runsc
// and the host that made it), the build log (it stays on the building
// node), device files and FIFOs (the unpacker drops them; sandboxes get
// their own /dev) and extended attributes. A template made from a
// session with its memory names its memory snapshot, which the session
// manager seals in the object store (as every snapshot).

// MaxHeldTemplates bounds the template IDs Held returns (what a node
// publishes in its fleet status).
const MaxHeldTemplates = 64

// pullCall is one pull in progress; the requests that wait for it read
// err once done is closed.
type pullCall struct {
	done    chan struct{}
	err     error
	waiters int // requests waiting for it (under Service.mu)
}

// PullFunc is told of every pull a node ended: the template, how long it
// took and its error (nil: pulled).
type PullFunc func(templateID string, took time.Duration, err error)

// upload writes the template directory dir as a compressed tar into a
// scratch file, stores it in the object store and returns its digest.
func (s *Service) upload(ctx context.Context, id, dir string) (string, int64, error) {
	f, err := os.CreateTemp(s.tmpDir(), "upload-"+id+"-")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	if err := writeArchive(ctx, dir, io.MultiWriter(f, h)); err != nil {
		return "", 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	n, err := s.cfg.Blobs.Put(ctx, airlock.TemplateBlobKey(id, digest), f)
	if err != nil {
		return "", 0, err
	}
	return digest, n, nil
}

// writeArchive writes the tree below dir (names relative to it) as a
// zstd-compressed tar: directories, regular files (a file linked more
// than once inside the tree as a hard link to its first name) and
// symbolic links, with their modes and owners. Anything else is left
// out.
func writeArchive(ctx context.Context, dir string, w io.Writer) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	seen := map[[2]uint64]string{} // (device, inode) -> the first name
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if !mode.IsDir() && !mode.IsRegular() && mode&fs.ModeSymlink == 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), int(st.Uid), int(st.Gid), "", ""
		h.Format, h.AccessTime, h.ChangeTime = tar.FormatPAX, time.Time{}, time.Time{}
		if mode.IsDir() {
			h.Name += "/"
		}
		if mode.IsRegular() && st.Nlink > 1 {
			k := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := seen[k]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			seen[k] = h.Name
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !mode.IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		n, err := io.Copy(tw, in)
		if err == nil && n != h.Size {
			err = fmt.Errorf("%s changed while it was archived", rel)
		}
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return err
}

// notOnNode is the answer for a template this node cannot serve.
func notOnNode(t *airlock.Template, why string) error {
	return airlock.Problem(airlock.EUNAVAILABLE, "template-not-on-node", "template %q is not on this node: %s", t.Name, why).RetryLater(5 * time.Second)
}

// ensureLocal makes sure the template's rootfs is on this node, pulling
// it from the object store the first time; requests for a template being
// pulled wait for that one pull (or until their ctx ends).
func (s *Service) ensureLocal(ctx context.Context, t *airlock.Template) error {
	if _, err := os.Stat(filepath.Join(s.rootfsDir(t.ID), "rootfs")); err == nil {
		return nil
	}
	if s.cfg.Blobs == nil || t.BlobDigest == "" {
		return notOnNode(t, "it was built on another node and is not in a shared object store")
	}
	s.mu.Lock()
	c := s.pulls[t.ID]
	if c == nil {
		c = &pullCall{done: make(chan struct{})}
		s.pulls[t.ID] = c
		s.wg.Add(1)
		go func(t airlock.Template) {
			defer s.wg.Done()
			start := time.Now()
			c.err = s.pull(s.ctx, &t)
			if s.cfg.OnPull != nil {
				s.cfg.OnPull(t.ID, time.Since(start), c.err)
			}
			if c.err != nil {
				s.cfg.Logger.Error("pull a template from the object store", "template", t.ID, "err", c.err)
			} else {
				s.cfg.Logger.Info("template pulled from the object store", "template", t.ID, "took", time.Since(start).Round(time.Millisecond))
			}
			s.mu.Lock()
			delete(s.pulls, t.ID)
			s.mu.Unlock()
			close(c.done)
		}(*t)
	}
	c.waiters++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.waiters--
		s.mu.Unlock()
	}()
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.err != nil {
		var ae *airlock.Error
		if errors.As(c.err, &ae) && ae.Type == "template-not-on-node" {
			return c.err
		}
		return notOnNode(t, "pulling it from the object store failed (the server's log has the details)")
	}
	return nil
}

// ErrDigestMismatch is a pulled archive whose digest is not the one its
// template's record holds: it was changed in the object store, and is
// refused.
var ErrDigestMismatch = errors.New("the template's archive in the object store does not match its recorded digest")

// pull fetches the template's archive, unpacks it into a scratch
// directory, checks its digest and moves it into place.
func (s *Service) pull(ctx context.Context, t *airlock.Template) error {
	if _, err := os.Stat(s.rootfsDir(t.ID)); err == nil {
		// A directory without its rootfs: left half-removed; start anew.
		s.removeRootfs(t.ID)
	}
	rc, _, err := s.cfg.Blobs.Open(ctx, airlock.TemplateBlobKey(t.ID, t.BlobDigest))
	if errors.Is(err, airlock.ErrNotFound) {
		return notOnNode(t, "its archive is not in the object store")
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.MkdirTemp(s.tmpDir(), "pull-"+t.ID+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	h := sha256.New()
	body := io.TeeReader(ctxReader{ctx, rc}, h)
	// Room for what Finish added beyond the build's bound.
	maxBytes := s.cfg.MaxBytes + s.cfg.MaxBytes/4
	if err := unpackArchive(body, tmp, maxBytes, s.cfg.MaxFiles+s.cfg.MaxFiles/4); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != t.BlobDigest {
		return fmt.Errorf("template %s: %w (object %s, record %s)", t.ID, ErrDigestMismatch, got, t.BlobDigest)
	}
	var meta templateMeta
	b, err := os.ReadFile(filepath.Join(tmp, "template.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil || meta.Template != t.ID {
		return fmt.Errorf("template %s: the archive's template.json is not this template's", t.ID)
	}
	if fi, err := os.Lstat(filepath.Join(tmp, "rootfs")); err != nil || !fi.IsDir() {
		return fmt.Errorf("template %s: the archive holds no rootfs", t.ID)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, s.rootfsDir(t.ID))
}

// unpackArchive unpacks a template archive (writeArchive's) into dir with
// the OCI layers' unpacker: names checked, nothing resolved out of dir,
// devices dropped, bytes and files bounded.
func unpackArchive(r io.Reader, dir string, maxBytes, maxFiles int64) error {
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return refuse("the template archive is not zstd: %v", err)
	}
	defer zr.Close()
	u, err := newUnpacker(dir, maxBytes, maxFiles, io.Discard)
	if err != nil {
		return err
	}
	defer u.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refuse("the template archive is not a readable tar: %v", err)
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		if err := u.entry(tr, h, rel); err != nil {
			return err
		}
	}
}

// deleteObject removes a deleted template's archive from the object
// store.
func (s *Service) deleteObject(ctx context.Context, t *airlock.Template) {
	if s.cfg.Blobs == nil || t.BlobDigest == "" {
		return
	}
	if err := s.cfg.Blobs.Delete(context.WithoutCancel(ctx), airlock.TemplateBlobKey(t.ID, t.BlobDigest)); err != nil {
		s.cfg.Logger.Error("delete a template's archive from the object store", "template", t.ID, "err", err)
	}
}

// Held returns the IDs of the templates whose rootfs is on this node,
// the most recently made or pulled first, at most MaxHeldTemplates.
func (s *Service) Held() []string {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	type held struct {
		id  string
		mod time.Time
	}
	var hs []held
	for _, e := range ents {
		if !e.IsDir() || !isTemplateID(e.Name()) {
			continue
		}
		fi, err := os.Stat(filepath.Join(s.dir, e.Name(), "rootfs"))
		if err != nil {
			continue
		}
		hs = append(hs, held{e.Name(), fi.ModTime()})
	}
	sort.Slice(hs, func(i, j int) bool {
		if !hs[i].mod.Equal(hs[j].mod) {
			return hs[i].mod.After(hs[j].mod)
		}
		return hs[i].id < hs[j].id
	})
	out := make([]string, 0, min(len(hs), MaxHeldTemplates))
	for _, h := range hs[:min(len(hs), MaxHeldTemplates)] {
		out = append(out, h.id)
	}
	return out
}
