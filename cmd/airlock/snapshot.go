package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
)

const snapshotUsage = `usage:
  airlock snapshot create SESSION [--name NAME] [--memory] [--json]
  airlock snapshot ls [--json]
  airlock snapshot show SNAPSHOT
  airlock snapshot rm SNAPSHOT...
  airlock session pause SESSION
  airlock session resume SESSION
  airlock session fork SESSION [--count N] [--memory] [--json]

Snapshots are sealed copies of a session's workspace (with --memory, of
the whole sandbox); a new session starts from one with
'airlock session create --from-snapshot SNAPSHOT'. Pause saves a session
to disk and frees its sandbox; resume restores it. Fork makes N new
sessions from one (with --memory, its processes too, reseeded).

flags:
  --url URL, --key KEY    server and API key (default $AIRLOCK_URL and
                          $AIRLOCK_API_KEY, else http://127.0.0.1:8080 and
                          $AIRLOCK_STATE_DIR/default.key)
`

func runSnapshot(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return usageError(std.err, "snapshot", "want a subcommand: create, ls, show or rm")
	}
	fs := newFlagSet("snapshot "+args[0], snapshotUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	name := fs.String("name", "", "")
	memory := fs.Bool("memory", false, "")
	asJSON := fs.Bool("json", false, "")
	switch args[0] {
	case "create", "ls", "list", "show", "get", "rm", "delete":
	case "-h", "--help", "help":
		fmt.Fprint(std.err, snapshotUsage)
		return nil
	default:
		return usageError(std.err, "snapshot", "unknown subcommand %q (want create, ls, show or rm)", args[0])
	}
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	switch args[0] {
	case "create":
		if len(pos) != 1 {
			return usageError(std.err, "snapshot create", "want one SESSION")
		}
		s, err := c.CreateSnapshot(ctx, pos[0], airlock.CreateSnapshotRequest{Name: *name, IncludeMemory: *memory})
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		if *asJSON {
			printJSON(std, s)
		} else {
			fmt.Fprintln(std.out, s.ID)
		}
	case "ls", "list":
		var all []*airlock.Snapshot
		before := ""
		for {
			p, err := c.ListSnapshots(ctx, before, 100)
			if err != nil {
				return apiFailed(std, err, &srv)
			}
			all = append(all, p.Snapshots...)
			if p.NextCursor == "" {
				break
			}
			before = p.NextCursor
		}
		if *asJSON {
			printJSON(std, all)
			return nil
		}
		tw := tabwriter.NewWriter(std.out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tSESSION\tNAME\tBYTES\tCREATED")
		for _, s := range all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.Kind, s.SessionID, s.Name, s.Bytes, s.CreatedAt.Local().Format(time.DateTime))
		}
		tw.Flush()
	case "show", "get":
		if len(pos) != 1 {
			return usageError(std.err, "snapshot show", "want one SNAPSHOT")
		}
		s, err := c.Snapshot(ctx, pos[0])
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		printJSON(std, s)
	case "rm", "delete":
		if len(pos) == 0 {
			return usageError(std.err, "snapshot rm", "want one or more SNAPSHOT IDs")
		}
		for _, id := range pos {
			if err := c.DeleteSnapshot(ctx, id); err != nil {
				return apiFailed(std, err, &srv)
			}
			fmt.Fprintf(std.out, "%s deleted\n", id)
		}
	}
	return nil
}

// runSessionKeep is airlock session pause, resume and fork.
func runSessionKeep(ctx context.Context, verb string, args []string, std stdio) error {
	fs := newFlagSet("session "+verb, snapshotUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	count := fs.String("count", "1", "")
	memory := fs.Bool("memory", false, "")
	asJSON := fs.Bool("json", false, "")
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
		if *asJSON {
			printJSON(std, r)
			return nil
		}
		for _, s := range r.Sessions {
			fmt.Fprintln(std.out, s.ID)
		}
	}
	return nil
}
