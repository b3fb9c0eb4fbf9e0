package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// buildArgs is a repeatable --build-arg KEY=VALUE.
type buildArgs map[string]string

func (b buildArgs) String() string { return "" }

func (b buildArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--build-arg wants KEY=VALUE, not %q", s)
	}
	b[k] = v
	return nil
}

// allowList is a repeatable --allow HOST: the build's network allow list.
type allowList []string

func (a *allowList) String() string { return strings.Join(*a, ",") }

func (a *allowList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("--allow wants a host, host:port or *.domain[:port]")
	}
	*a = append(*a, s)
	return nil
}

// runTemplateBuild is airlock template build -f Dockerfile DIR --name
// NAME: DIR is sent as the build context (a tar uploaded with POST
// /v1/templates/contexts), the template is created with the Dockerfile,
// and the build log is followed until the build ends; a failed build
// names its line and exits non-zero.
func runTemplateBuild(ctx context.Context, c *client.Client, dockerfile, dir string, req airlock.CreateTemplateRequest, std stdio) (*airlock.Template, error) {
	if dockerfile == "" {
		dockerfile = filepath.Join(dir, "Dockerfile")
	}
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		return nil, fmt.Errorf("read the Dockerfile: %w", err)
	}
	req.Dockerfile = string(df)
	tmp, err := os.CreateTemp("", "airlock-context-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := writeContext(dir, tmp)
	if err != nil {
		return nil, fmt.Errorf("pack the build context %s: %w", dir, err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	fmt.Fprintf(std.err, "build context: %s (%d entries, %d bytes)\n", dir, n, size)
	tc, err := c.UploadTemplateContext(ctx, tmp, size)
	if err != nil {
		return nil, err
	}
	req.Context = tc.ID
	t, err := c.CreateTemplate(ctx, req)
	if err != nil {
		return nil, err
	}
	return awaitTemplate(ctx, c, t.Name, std.err)
}

// awaitTemplate streams a template's build log to w until the build
// ends, and returns the template as it ended.
func awaitTemplate(ctx context.Context, c *client.Client, name string, w io.Writer) (*airlock.Template, error) {
	if err := c.TemplateLogs(ctx, name, w); err != nil {
		return nil, err
	}
	return c.Template(ctx, name)
}

// printTemplate writes t as -o asks (json or table), else its name alone.
func printTemplate(std stdio, out *outputFlags, t *airlock.Template) error {
	switch {
	case out.json(std):
		return writeJSON(std.out, t)
	case out.format == formatTable:
		return writeRecord(std.out, t)
	}
	fmt.Fprintln(std.out, t.Name)
	return nil
}

// writeContext writes the tree dir as a tar (regular files, directories
// and symbolic links, names relative to dir) and returns its entries.
func writeContext(dir string, w io.Writer) (int, error) {
	tw := tar.NewWriter(w)
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return nil // sockets, devices, pipes: not sent
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n++
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, tw.Close()
}

// templateFailed is the error of a build that ended failed: its line
// (when a Dockerfile line is to blame) and reason.
func templateFailed(t *airlock.Template) error {
	if t.FailedLine > 0 {
		return fmt.Errorf("template %s failed at Dockerfile line %d: %s", printableText(t.Name), t.FailedLine, printableText(t.Reason))
	}
	return fmt.Errorf("template %s failed: %s", printableText(t.Name), printableText(t.Reason))
}

var errBuildNoDir = errors.New("want one DIR (the build context) and --name NAME")
