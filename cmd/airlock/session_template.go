package main

import (
	"context"

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
		if t, err = awaitTemplate(ctx, c, t.Name, std.err); err != nil {
			return apiFailed(std, err, &srv)
		}
		if t.Status == airlock.TemplateFailed {
			return templateFailed(t)
		}
	}
	return printTemplate(std, &out, t)
}
