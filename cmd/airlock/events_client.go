package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const clientEventsUsage = `usage: airlock events [--cursor C] [--follow] [--json | -o json|table] [--limit N]
       airlock events --before CURSOR | --all    (the abuse events alone, newest first)

Prints the tenant's events, oldest first (GET /v1/events?cursor=): every
session transition (session.created, session.paused, session.resumed,
session.ended, session.abuse_killed, each with its reason) and every
abuse decision (abuse.detected). Without --cursor it starts at the oldest
kept event; it reads to the newest and prints the cursor to go on from.
With --follow it then waits for new events and prints them as they come,
until interrupted. The operator sees every tenant's with 'airlock admin
events'.

With --before or --all it lists the abuse events alone, newest first, as
it did before the feed. With --state-dir or --tenant this is the old
node-local command, now 'airlock node events' (deprecated).

flags:
  --cursor C           start after this event (the cursor printed last time)
  --follow             keep waiting for new events (polls every 2 s)
  --json               one JSON object per event and line (same as -o json)
  -o, --output FORMAT  table (default) or json
  --limit N            events per request (default 50, at most 500)
  --before CURSOR      abuse events before this one
  --all                abuse events, following the cursor to the end
  --url URL, --key KEY, --profile NAME
                       server, API key and profile (see airlock login)
`

// eventsPoll is how often --follow asks for new events.
const eventsPoll = 2 * time.Second

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
		srv    serverFlags
		out    outputFlags
		pages  pageFlags
		cursor = fs.String("cursor", "", "")
		follow = fs.Bool("follow", false, "")
	)
	srv.register(fs)
	out.register(fs, false)
	fs.BoolFunc("json", "one JSON object per event and line", func(string) error {
		out.format = formatJSON
		return nil
	})
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
	abuse := pages.before != "" || pages.all
	if abuse && (*cursor != "" || *follow) {
		return errUsage("events", "--before and --all (the abuse list) do not go with --cursor or --follow")
	}
	if !abuse {
		c, err := srv.client(nil)
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		return feedEvents(ctx, c, std, out.json(std), *cursor, pages.limit, *follow, &srv)
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

// feedEvents prints the event feed from cursor to its end, and with
// follow waits for more until ctx ends.
func feedEvents(ctx context.Context, c *client.Client, std stdio, asJSON bool, cursor string, limit int, follow bool, srv *serverFlags) error {
	var t *table
	if !asJSON {
		t = newTable(std.out, "TIME", "TYPE", "SESSION", "REASON", "ID")
	}
	enc := json.NewEncoder(std.out)
	for {
		p, err := c.Events(ctx, cursor, limit)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return apiFailed(std, err, srv)
		}
		for _, ev := range p.Events {
			if asJSON {
				if err := enc.Encode(ev); err != nil {
					return err
				}
				continue
			}
			t.row(ev.At.UTC().Format(time.RFC3339Nano), ev.Type, ev.SessionID, ev.Reason, ev.ID)
		}
		if t != nil {
			if err := t.flush(); err != nil {
				return err
			}
			// Later rows are aligned on their own.
			t = &table{tw: tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)}
		}
		cursor = p.NextCursor
		if len(p.Events) == limit {
			continue
		}
		if !follow {
			if cursor != "" {
				fmt.Fprintf(std.err, "airlock: to read on: airlock events --cursor %s\n", cursor)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(eventsPoll):
		}
	}
}
