package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

const clientEventsUsage = `usage: airlock events [--limit N] [--before CURSOR] [--all] [-o json|table]

Lists the tenant's abuse events (GET /v1/events), newest first: each says
the detector (mining, scanning, fork-bomb, dns-tunnel), the session or
execution, what was seen and what was done (killed, quarantined,
recorded). The operator sees every tenant's with 'airlock admin events'.

With --state-dir or --tenant this is the old node-local command, now
'airlock node events' (deprecated).

flags:
  --limit N            events per page (default 50, at most 500)
  --before CURSOR      events before this one (the cursor printed after a
                       page)
  --all                follow the cursor to the end
  -o, --output FORMAT  table (default) or json
  --url URL, --key KEY, --profile NAME
                       server, API key and profile (see airlock login)
`

func runClientEvents(ctx context.Context, args []string, std stdio) error {
	if slices.ContainsFunc(args, func(a string) bool {
		return a == "--state-dir" || a == "-state-dir" || a == "--tenant" || a == "-tenant" ||
			strings.HasPrefix(a, "--state-dir=") || strings.HasPrefix(a, "--tenant=")
	}) {
		fmt.Fprintln(std.err, "airlock: 'airlock events --state-dir/--tenant' is deprecated and goes in the next release; use 'airlock node events' (or 'airlock admin events')")
		return runEvents(ctx, args, std)
	}
	fs := newFlagSet("events", clientEventsUsage, std.err)
	var (
		srv   serverFlags
		out   outputFlags
		pages pageFlags
	)
	srv.register(fs)
	out.register(fs, true)
	pages.register(fs, 50)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return errUsage("events", "unexpected argument %q", pos[0])
	}
	if err := pages.check("events"); err != nil {
		return err
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	// Events is never null in JSON: an empty list is [].
	page := &airlock.AbuseEventPage{Events: []*airlock.AbuseEvent{}}
	page.NextCursor, err = pages.follow(ctx, func(ctx context.Context, limit int, before string) (string, error) {
		p, err := c.ListEvents(ctx, limit, before)
		if err != nil {
			return "", err
		}
		page.Events = append(page.Events, p.Events...)
		return p.NextCursor, nil
	})
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, page)
	}
	t := newTable(std.out, "TIME", "DETECTOR", "ACTION", "SESSION/EXECUTION", "EVIDENCE", "ID")
	for _, ev := range page.Events {
		owner := ev.SessionID
		if owner == "" {
			owner = ev.ExecutionID
		}
		t.row(ev.Time.UTC().Format(time.RFC3339), ev.Detector, ev.Action, owner, evidenceText(ev.Evidence), ev.ID)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(std.err, "airlock: more: airlock events --limit %d --before %s\n", pages.limit, page.NextCursor)
	}
	return nil
}
