package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const snapshotUsage = `usage:
  airlock snapshot create SESSION [--name NAME] [--memory] [-o json|table]
  airlock snapshot ls [-o json|table]
  airlock snapshot show SNAPSHOT [-o json|table]
  airlock snapshot rm SNAPSHOT...
  airlock session pause SESSION
  airlock session resume SESSION
  airlock session fork SESSION [--count N] [--memory] [-o json|table]

Snapshots are sealed copies of a session's workspace (with --memory, of
the whole sandbox); a new session starts from one with
'airlock session create --from-snapshot SNAPSHOT'. Pause saves a session
to disk and frees its sandbox; resume restores it. Fork makes N new
sessions from one (with --memory, its processes too, reseeded).

flags:
  -o, --output FORMAT     table or json (--json: deprecated, -o json);
                          create and fork print only IDs without it
  --url URL, --key KEY, --profile NAME
                          server, API key and profile (see airlock login)
`

func runSnapshot(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("snapshot", "want a subcommand: create, ls, show or rm")
	}
	verb := args[0]
	switch verb {
	case "create", "ls", "list", "show", "get", "rm", "delete":
	default:
		return errUsage("snapshot", "unknown subcommand %q (want create, ls, show or rm)", verb)
	}
	fs := newFlagSet("snapshot "+verb, snapshotUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, true)
	name := fs.String("name", "", "")
	memory := fs.Bool("memory", false, "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fail := func(err error) error { return apiFailed(std, err, &srv) }
	switch verb {
	case "create":
		if len(pos) != 1 {
			return errUsage("snapshot create", "want one SESSION")
		}
		s, err := c.CreateSnapshot(ctx, pos[0], airlock.CreateSnapshotRequest{Name: *name, IncludeMemory: *memory})
		if err != nil {
			return fail(err)
		}
		switch {
		case out.json(std):
			return writeJSON(std.out, s)
		case out.format == formatTable:
			return writeRecord(std.out, s)
		}
		fmt.Fprintln(std.out, s.ID)
		return nil
	case "ls", "list":
		return listSnapshots(ctx, c, &out, std, fail)
	case "show", "get":
		if len(pos) != 1 {
			return errUsage("snapshot show", "want one SNAPSHOT")
		}
		s, err := c.Snapshot(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, s)
		}
		return writeRecord(std.out, s)
	}
	if len(pos) == 0 {
		return errUsage("snapshot rm", "want one or more SNAPSHOT IDs")
	}
	for _, id := range pos {
		if err := c.DeleteSnapshot(ctx, id); err != nil {
			return fail(err)
		}
		fmt.Fprintf(std.out, "%s deleted\n", printableText(id))
	}
	return nil
}

// listSnapshots prints every snapshot of the tenant, following the cursor.
func listSnapshots(ctx context.Context, c *client.Client, out *outputFlags, std stdio, fail func(error) error) error {
	var all []*airlock.Snapshot
	before := ""
	for {
		p, err := c.ListSnapshots(ctx, before, 100)
		if err != nil {
			return fail(err)
		}
		all = append(all, p.Snapshots...)
		if p.NextCursor == "" {
			break
		}
		before = p.NextCursor
	}
	if out.json(std) {
		return writeJSON(std.out, all)
	}
	t := newTable(std.out, "ID", "KIND", "SESSION", "NAME", "BYTES", "CREATED")
	for _, s := range all {
		t.row(s.ID, s.Kind, s.SessionID, s.Name, s.Bytes, s.CreatedAt.Local().Format(time.DateTime))
	}
	return t.flush()
}

// runSessionKeep is airlock session pause, resume and fork.
func runSessionKeep(ctx context.Context, verb string, args []string, std stdio) error {
	fs := newFlagSet("session "+verb, snapshotUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	count := fs.String("count", "1", "")
	memory := fs.Bool("memory", false, "")
	var out outputFlags
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "session "+verb, "want one SESSION")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	switch verb {
	case "pause", "resume":
		f := c.PauseSession
		if verb == "resume" {
			f = c.ResumeSession
		}
		s, err := f(ctx, pos[0])
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		fmt.Fprintf(std.out, "%s %s\n", s.ID, s.State)
	case "fork":
		n, err := strconv.Atoi(*count)
		if err != nil || n < 1 {
			return usageError(std.err, "session fork", "--count must be a whole number, at least 1")
		}
		r, err := c.ForkSession(ctx, pos[0], airlock.ForkRequest{Count: n, IncludeMemory: *memory})
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		switch {
		case out.json(std):
			return writeJSON(std.out, r)
		case out.format == formatTable:
			t := newTable(std.out, "ID", "STATE", "IMAGE", "EXPIRES")
			for _, s := range r.Sessions {
				t.row(s.ID, s.State, s.Image, s.ExpiresAt.Local().Format(time.DateTime))
			}
			return t.flush()
		}
		for _, s := range r.Sessions {
			fmt.Fprintln(std.out, s.ID)
		}
	}
	return nil
}
