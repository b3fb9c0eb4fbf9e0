package main

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// runSessionTemplate is airlock session template SESSION --name NAME
// [--include-memory] [--wait]: the session's filesystem (and with
// --include-memory its memory) becomes a template of the tenant's.
func runSessionTemplate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session template", sessionUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, true)
	name := fs.String("name", "", "")
	memory := fs.Bool("include-memory", false, "")
	wait := fs.Bool("wait", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 || *name == "" {
		return usageError(std.err, "session template", "want one SESSION and --name NAME")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	t, err := c.SessionTemplate(ctx, pos[0], airlock.SessionTemplateRequest{Name: *name, IncludeMemory: *memory})
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if *wait {
		if err := c.TemplateLogs(ctx, t.Name, std.err); err != nil {
			return apiFailed(std, err, &srv)
		}
		if t, err = c.Template(ctx, t.Name); err != nil {
			return apiFailed(std, err, &srv)
		}
		if t.Status == airlock.TemplateFailed {
			return templateFailed(t)
		}
	}
	switch {
	case out.json(std):
		return writeJSON(std.out, t)
	case out.format == formatTable:
		return writeRecord(std.out, t)
	}
	fmt.Fprintln(std.out, t.Name)
	return nil
}
