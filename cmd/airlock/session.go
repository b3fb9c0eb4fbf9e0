package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const sessionUsage = `usage:
  airlock session create [--image NAME] [--size small|medium|large]
                         [--timeout SEC] [--idle-timeout SEC]
                         [--idempotency-key KEY] [--from-snapshot ID]
                         [--volume NAME:PATH[:ro]]... [-o json|table]
  airlock session ls [--all] [-o json|table]
  airlock session show SESSION [-o json|table]
  airlock session extend SESSION SEC
  airlock session metrics SESSION [--start TIME] [--end TIME] [-o json|table]
  airlock session rm SESSION...
  airlock session pause|resume SESSION, fork SESSION [--count N] [--memory]
                         (see 'airlock snapshot help')
  airlock session template SESSION --name NAME [--include-memory] [--wait]
                         [-o json|table]

Manages sessions: sandboxes kept for many calls (airlock exec, cp, repl)
until their timeout, their idle timeout or rm.

  create  makes a session and prints its ID (the whole record with -o json
          or -o table), so that S=$(airlock session create) works
  ls      lists live sessions, newest first (--all: ended ones too)
  show    prints a session's record: state, limits, usage, expiry
  extend  sets a session to expire SEC seconds from now
  metrics prints a session's resource samples (CPU in percent of its CPU
          limit, memory, disk, network totals), oldest first; --start and
          --end (RFC 3339, e.g. 2026-01-02T15:04:05Z) select a range
  rm      destroys sessions and everything in them
  template makes a template of the tenant's from a running session: its
          workspace on its image (and with --include-memory its processes
          and code contexts, restored and reseeded in every session from
          the template); prints the template's name once it is recorded
          (--wait: follows the build log until it is ready or failed)

flags:
  --image NAME            image (default: the server's, python-ds)
  --size SIZE             small, medium or large (default small)
  --timeout SEC           lifetime in seconds (default: the server's, 600)
  --idle-timeout SEC      end after SEC seconds with nothing running
  --idempotency-key KEY   a retry with the same key gets the same session
  --from-snapshot ID      start with the workspace (or whole sandbox) of a
                          snapshot (airlock snapshot)
  --volume NAME:PATH[:ro] mount the volume NAME at PATH (read-only with :ro);
                          repeatable (airlock volume)
  -o, --output FORMAT     table or json (--json: deprecated, -o json)
  --url URL, --key KEY, --profile NAME
                          server, API key and profile (default $AIRLOCK_URL,
                          $AIRLOCK_API_KEY and $AIRLOCK_PROFILE, else the
                          current profile; see airlock login)
`

func runSession(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return usageError(std.err, "session", "want a subcommand: create, ls, show, extend, metrics or rm")
	}
	switch args[0] {
	case "create", "new":
		return runSessionCreate(ctx, args[1:], std)
	case "ls", "list":
		return runSessionList(ctx, args[1:], std)
	case "show", "get":
		return runSessionShow(ctx, args[1:], std)
	case "extend":
		return runSessionExtend(ctx, args[1:], std)
	case "metrics":
		return runSessionMetrics(ctx, args[1:], std)
	case "rm", "delete":
		return runSessionRemove(ctx, args[1:], std)
	case "pause", "resume", "fork": // snapshot.go
		return runSessionKeep(ctx, args[0], args[1:], std)
	case "template": // session_template.go
		return runSessionTemplate(ctx, args[1:], std)
	case "-h", "--help", "help":
		fmt.Fprint(std.err, sessionUsage)
		return nil
	}
	return usageError(std.err, "session", "unknown subcommand %q (want create, ls, show, extend, metrics or rm)", args[0])
}

// apiFailed prints an API error and returns exit status 1.
func apiFailed(std stdio, err error, srv *serverFlags) error {
	fmt.Fprintf(std.err, "airlock: %s\n", describeError(err, srv.serverURL()))
	return exitError{1}
}

func runSessionCreate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session create", sessionUsage, std.err)
	var (
		req     airlock.CreateSessionRequest
		size    string
		key     string
		out     outputFlags
		srv     serverFlags
		timeout int
		idle    int
	)
	fs.StringVar(&req.Image, "image", "", "")
	fs.StringVar(&size, "size", "", "")
	fs.IntVar(&timeout, "timeout", 0, "")
	fs.IntVar(&idle, "idle-timeout", 0, "")
	fs.StringVar(&key, "idempotency-key", "", "")
	fs.StringVar(&req.FromSnapshot, "from-snapshot", "", "")
	fs.Var((*volumeFlag)(&req.Volumes), "volume", "")
	out.register(fs, true)
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return usageError(std.err, "session create", "unexpected argument %q", pos[0])
	}
	req.Size, req.TimeoutS, req.IdleTimeoutS = airlock.SessionSize(size), timeout, idle
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	var opts []client.SessionOption
	if key != "" {
		opts = append(opts, client.WithIdempotencyKey(key))
	}
	s, _, err := c.CreateSession(ctx, req, opts...)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	switch {
	case out.json(std):
		return writeJSON(std.out, s)
	case out.format == formatTable:
		return writeRecord(std.out, s)
	}
	fmt.Fprintln(std.out, s.ID)
	return nil
}

func runSessionList(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session ls", sessionUsage, std.err)
	var all bool
	var srv serverFlags
	var out outputFlags
	fs.BoolVar(&all, "all", false, "")
	out.register(fs, true)
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return usageError(std.err, "session ls", "unexpected argument %q", pos[0])
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	var sessions []*airlock.Session
	before := ""
	for {
		page, err := c.ListSessions(ctx, client.ListSessionsOptions{LiveOnly: !all, Before: before, Limit: 200})
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		sessions = append(sessions, page.Sessions...)
		if page.NextCursor == "" {
			break
		}
		before = page.NextCursor
	}
	if out.json(std) {
		return writeJSON(std.out, sessions)
	}
	t := newTable(std.out, "ID", "STATE", "IMAGE", "SIZE", "CREATED", "EXPIRES", "ENDED")
	for _, s := range sessions {
		t.row(s.ID, s.State, s.Image, s.Size, s.CreatedAt.Local().Format(time.DateTime), s.ExpiresAt.Local().Format(time.DateTime), s.EndReason)
	}
	return t.flush()
}

func runSessionShow(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session show", sessionUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "session show", "want one SESSION")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	s, err := c.Session(ctx, pos[0])
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, s)
	}
	return writeRecord(std.out, s)
}

func runSessionExtend(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session extend", sessionUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 2 {
		return usageError(std.err, "session extend", "want SESSION and SEC")
	}
	secs, err := strconv.Atoi(pos[1])
	if err != nil || secs < 1 {
		return usageError(std.err, "session extend", "SEC must be a whole number of seconds, at least 1")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	s, err := c.ExtendSession(ctx, pos[0], secs)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fmt.Fprintf(std.out, "%s expires at %s\n", s.ID, s.ExpiresAt.Local().Format(time.DateTime))
	return nil
}

func runSessionRemove(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session rm", sessionUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) == 0 {
		return usageError(std.err, "session rm", "want one or more SESSION IDs")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	failed := 0
	for _, id := range pos {
		s, err := c.DeleteSession(ctx, id)
		if err != nil {
			fmt.Fprintf(std.err, "airlock: %s: %s\n", printableText(id), describeError(err, srv.serverURL()))
			failed++
			continue
		}
		fmt.Fprintf(std.out, "%s %s\n", s.ID, s.State)
	}
	if failed > 0 {
		return exitError{1}
	}
	return nil
}
