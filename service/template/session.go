package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlockhq/airlock"
)

// Templates from a session.
//
// A gVisor session's root filesystem is its image's rootfs mounted
// read-only (runsc --overlay2 none, root.readonly): nothing a session
// does changes it. What a session writes lands in /workspace and /tmp,
// host directories on the session's own disk, in volumes, and in /dev
// and /dev/shm (tmpfs in the sandbox's memory). A template from a
// session is therefore the session's image's rootfs (hard links: that
// tree is never written in place) with the session's workspace as the
// template's /workspace; a sandbox started from the template gets a
// fresh disk whose workspace is a copy of it (the backend seeds it).
// /tmp, volumes and /dev/shm are not kept.

// SessionSource is what a template from a session is made of.
type SessionSource struct {
	// SessionID is the session the template is made from.
	SessionID string
	// Image is the session's image: its rootfs is the template's base,
	// and its environment, start_cmd and ready_cmd are the template's.
	Image *airlock.Image
	// CopyWorkspace writes the session's workspace into dir (an empty
	// directory of the service's); it is called before CreateFromSession
	// returns, so the copy is of the session as it is now.
	CopyWorkspace func(ctx context.Context, dir string) error
	// MemorySnapshotID is the memory snapshot the template holds, or "".
	MemorySnapshotID string
}

// ProblemSessionTemplate is the problem type of a template from a
// session that cannot be made from it as it is.
const ProblemSessionTemplate = "session-template-unsupported"

// CheckName answers 409 template-exists when the tenant has a template
// of that name already (a quick check before a session is saved; the
// record's unique index decides races).
func (s *Service) CheckName(ctx context.Context, tenant *airlock.Tenant, name string) error {
	if err := airlock.ValidateTemplateName(name); err != nil {
		return err
	}
	_, err := s.cfg.Store.TemplateByName(ctx, tenantID(tenant), name)
	switch {
	case err == nil:
		return airlock.Problem(airlock.ECONFLICT, "template-exists", "a template named %q exists; delete it first or choose another name", name)
	case airlock.ErrorCode(err) == airlock.ENOTFOUND:
		return s.checkQuota(ctx, tenant, 0)
	}
	return err
}

// CreateFromSession records a template of the tenant made from a
// session, copies the session's workspace now and builds the rest (the
// base rootfs linked in, our agent and hardening, the secret scan) in the
// background, like every template.
func (s *Service) CreateFromSession(ctx context.Context, tenant *airlock.Tenant, name string, src SessionSource) (*airlock.Template, error) {
	if tenant == nil || src.Image == nil || src.CopyWorkspace == nil {
		return nil, errors.New("template from a session: no tenant, image or workspace")
	}
	if err := airlock.ValidateTemplateName(name); err != nil {
		return nil, err
	}
	if err := s.checkQuota(ctx, tenant, 0); err != nil {
		return nil, err
	}
	t := &airlock.Template{
		ID: airlock.NewID(), Name: name, TenantID: tenant.ID, Status: airlock.TemplateBuilding, Source: airlock.TemplateFromSession,
		SessionID: src.SessionID, StartCmd: src.Image.StartCmd, ReadyCmd: src.Image.ReadyCmd, MemorySnapshotID: src.MemorySnapshotID,
	}
	if err := s.cfg.Store.CreateTemplate(ctx, t); err != nil {
		return nil, err
	}
	stage := filepath.Join(s.tmpDir(), t.ID+"-workspace")
	fail := func(err error) (*airlock.Template, error) {
		os.RemoveAll(stage)
		s.cfg.Store.DeleteTemplate(context.WithoutCancel(ctx), t.ID)
		return nil, err
	}
	if err := os.Mkdir(stage, 0o755); err != nil {
		return fail(err)
	}
	if err := src.CopyWorkspace(ctx, stage); err != nil {
		return fail(err)
	}
	base := src.Image.Rootfs
	build := func(ctx context.Context, br *BuildRequest, log io.Writer, rootfs string) (*BuildResult, error) {
		defer os.RemoveAll(stage)
		fmt.Fprintf(log, "session %s on image %s\n", src.SessionID, src.Image.Name)
		fmt.Fprintf(log, "link the image's rootfs (read-only in the session: nothing of it changed)\n")
		if err := linkTree(ctx, base, rootfs); err != nil {
			return nil, fmt.Errorf("link the session's image: %w", err)
		}
		for _, p := range []string{"etc/passwd", "etc/group", "etc/shadow", "etc/gshadow"} {
			if err := unshareFile(rootfs, p); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(log, "the session's workspace becomes /workspace\n")
		ws := filepath.Join(rootfs, "workspace")
		if err := os.RemoveAll(ws); err != nil {
			return nil, err
		}
		if err := os.Rename(stage, ws); err != nil {
			return nil, err
		}
		files, bytes, err := treeCount(ws)
		if err != nil {
			return nil, err
		}
		if br.MaxFiles > 0 && files > br.MaxFiles {
			return nil, airlock.Problem(airlock.ETOOLARGE, ProblemTooLarge, "the session's workspace holds %d files, over the limit of %d", files, br.MaxFiles)
		}
		fmt.Fprintf(log, "workspace: %d files, %d bytes\n", files, bytes)
		return &BuildResult{Env: append([]string(nil), src.Image.Env...), Workdir: "/workspace"}, nil
	}
	log, err := newBuildLog(s.logPath(t.ID))
	if err != nil {
		return fail(err)
	}
	bctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.builds[t.ID] = &running{log: log, cancel: cancel}
	s.mu.Unlock()
	br := &BuildRequest{Template: *t, Request: airlock.CreateTemplateRequest{Name: name}, MaxBytes: s.cfg.MaxBytes, MaxFiles: s.cfg.MaxFiles}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.build(bctx, br, build, log)
	}()
	out := *t
	return &out, nil
}

// OnDeleteMemory sets what deleting a template that holds a memory
// snapshot calls to delete the snapshot too (the session manager's).
func (s *Service) OnDeleteMemory(f func(ctx context.Context, tenant *airlock.Tenant, snapshotID string) error) {
	s.mu.Lock()
	s.deleteMemory = f
	s.mu.Unlock()
}

// linkTree makes dst a copy of the tree src in which every
// non-directory is a hard link to src's (directories are made anew with
// src's mode and owner). Nothing writes into dst's files in place: the
// files Finish writes are replaced or unshared first.
func linkTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if !d.IsDir() {
			err := os.Link(p, target)
			if errors.Is(err, syscall.EXDEV) {
				return copyEntry(p, target)
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(target, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
}

// copyEntry copies a file or a symbolic link (when src and dst are on
// different filesystems); anything else is left out.
func copyEntry(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		to, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(to, dst); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	default:
		return nil
	}
	return os.Lchown(dst, int(st.Uid), int(st.Gid))
}

// unshareFile replaces the regular file rel of rootfs by a copy of its
// own, so that writing it does not write the tree it is linked from.
func unshareFile(rootfs, rel string) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	in, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := rel + ".airlock-copy"
	root.Remove(tmp)
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tmp, fi.Mode().Perm())
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("copy %s: %w", rel, err)
	}
	return root.Rename(tmp, rel)
}

// treeCount counts the entries and the bytes of regular files below dir.
func treeCount(dir string) (files, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		files++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	return files, bytes, err
}

// SnapshotHolder returns the name of the tenant's template whose memory
// is the snapshot snapshotID, or "" when no template holds it.
func (s *Service) SnapshotHolder(ctx context.Context, tenant *airlock.Tenant, snapshotID string) (string, error) {
	ts, err := s.cfg.Store.ListTemplates(ctx, tenantID(tenant))
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		if t.MemorySnapshotID == snapshotID && t.TenantID == tenant.ID {
			return t.Name, nil
		}
	}
	return "", nil
}
