package dockerfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/template"
)

// Limits of build arguments on a request.
const (
	maxBuildArgs      = 64
	maxBuildArgsBytes = 64 << 10
)

// Validate checks a template request's Dockerfile before it is recorded,
// so that a Dockerfile this builder refuses (an unsupported instruction,
// a second FROM, one over a limit) is a 400 naming the instruction and
// its line, not a build that fails later.
func (b *Builder) Validate(req *airlock.CreateTemplateRequest) error {
	if len(req.BuildArgs) > maxBuildArgs {
		return airlock.Problem(airlock.EINVALID, ProblemDockerfile, "at most %d build_args", maxBuildArgs)
	}
	n := 0
	for k, v := range req.BuildArgs {
		n += len(k) + len(v)
		if k == "" || n > maxBuildArgsBytes {
			return airlock.Problem(airlock.EINVALID, ProblemDockerfile, "build_args: empty names, or more than %d bytes together, are refused", maxBuildArgsBytes)
		}
	}
	if req.Network != nil && b.cfg.Egress == nil {
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "%v", ErrNoEgress)
	}
	d, err := Parse([]byte(req.Dockerfile), b.cfg.Limits)
	if err == nil {
		_, err = d.FromRef(req.BuildArgs)
	}
	if err != nil {
		return problemOf(err)
	}
	return nil
}

// BuildExecutionID is the execution ID a template build's RUN steps are
// recorded under in the egress log.
func BuildExecutionID(templateID string) string { return "build-" + templateID }

// ProblemDockerfile is the problem type of a Dockerfile this builder
// refuses.
const ProblemDockerfile = "invalid-dockerfile"

// problemOf is a Parse error as the client sees it: an EINVALID problem
// with the line and the instruction.
func problemOf(err error) error {
	var le *LineError
	if !errors.As(err, &le) {
		return err
	}
	p := airlock.Problem(airlock.EINVALID, ProblemDockerfile, "%s", le.Error())
	if le.Line > 0 {
		p = p.With("line", le.Line)
	}
	if le.Instruction != "" {
		p = p.With("instruction", le.Instruction)
	}
	return p
}

// TemplateBuilder is b as the template service's builder of Dockerfile
// templates. resolveFrom finds FROM's image for a tenant: our images,
// the tenant's (or the operator's) templates, or a registry image, whose
// pull it logs to log.
func (b *Builder) TemplateBuilder(resolveFrom func(ctx context.Context, tenantID, ref string, log io.Writer) (*airlock.Image, error)) template.Builder {
	return func(ctx context.Context, req *template.BuildRequest, log io.Writer, rootfs string) (*template.BuildResult, error) {
		ctxDir := ""
		if req.ContextPath != "" {
			dir, err := os.MkdirTemp(b.tmpDir(), "context-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			fmt.Fprintf(log, "unpack the build context\n")
			if err := extractContext(req.ContextPath, dir); err != nil {
				return nil, airlock.Problem(airlock.EINVALID, ProblemDockerfile, "build context: %v", err)
			}
			ctxDir = dir
		}
		tenant := req.Template.TenantID
		var network *airlock.NetworkRequest
		if n := req.Request.Network; n != nil {
			if tenant == "" {
				return nil, airlock.Problem(airlock.EINVALID, "invalid-template-source", "network is for a tenant's build: the egress log and budget are a tenant's")
			}
			network = &airlock.NetworkRequest{TenantID: tenant, ExecutionID: BuildExecutionID(req.Template.ID), Policy: n.Policy()}
		}
		res, err := b.Build(ctx, Request{
			Network:    network,
			Dockerfile: []byte(req.Request.Dockerfile), ContextDir: ctxDir, BuildArgs: req.Request.BuildArgs, Log: log,
			ResolveFrom: func(ctx context.Context, ref string) (*airlock.Image, error) {
				return resolveFrom(ctx, tenant, ref, log)
			},
		})
		var se *StepError
		var le *LineError
		switch {
		case errors.As(err, &se):
			// The template's reason is "line N: " and this.
			msg := se.Text + ": " + se.Msg
			if se.ExitCode >= 0 {
				msg = fmt.Sprintf("%s: exit code %d", se.Text, se.ExitCode)
			}
			return nil, &template.StepError{Line: se.Line, Err: errors.New(msg)}
		case errors.As(err, &le):
			msg := le.Msg
			if le.Instruction != "" {
				msg = le.Instruction + ": " + msg
			}
			return nil, &template.StepError{Line: le.Line, Err: errors.New(msg)}
		case errors.Is(err, ErrSecret):
			return nil, airlock.Problem(airlock.EUNPROCESSABLE, image.ProblemSecret, "%v", err)
		case err != nil:
			return nil, err
		}
		// The template's own tree: hard links into the cached result, with
		// the files the template service appends to made copies of their
		// own (it must not write through a link into the cache).
		if err := linkTree(ctx, res.Rootfs, rootfs); err != nil {
			return nil, fmt.Errorf("link the result: %w", err)
		}
		for _, p := range []string{"etc/passwd", "etc/group", "etc/shadow", "etc/gshadow"} {
			if err := unshare(rootfs, p); err != nil {
				return nil, err
			}
		}
		return &template.BuildResult{Digest: "sha256:" + res.Key, Env: res.Env, Workdir: res.Workdir, User: res.User, Cache: res.Uses}, nil
	}
}

// unshare replaces the file rel of the tree rootfs, when it is a hard
// link shared with another tree, by a copy of its own.
func unshare(rootfs, rel string) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return nil // missing, or not a file: nothing written through it
	}
	tmp := rel + ".airlock-copy"
	if err := copyWithin(root, rel, tmp, fi.Mode()); err != nil {
		return err
	}
	return root.Rename(tmp, rel)
}

func copyWithin(root *os.Root, src, dst string, mode os.FileMode) error {
	in, err := root.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	root.Remove(dst)
	out, err := root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", filepath.Base(src), err)
	}
	return root.Chmod(dst, mode.Perm())
}
