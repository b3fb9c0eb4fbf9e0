package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

const webhookUsage = `usage:
  airlock webhook create URL [--event TYPE]... [-o json|table]
  airlock webhook ls [-o json|table]
  airlock webhook rm ID...
  airlock webhook deliveries ID [--limit N] [-o json|table]

A webhook receives the tenant's events (see 'airlock events'), each a
signed POST (header Airlock-Signature), retried with back-off for a day.
create prints the webhook's ID and its signing secret, which is shown
this once: keep it where the receiver can check signatures with it. rm
removes a webhook and its pending deliveries.

flags:
  --event TYPE         an event type the webhook takes (repeat, or give a
                       comma-separated list; none: every type): one of
                       session.created, session.paused, session.resumed,
                       session.ended, session.abuse_killed, abuse.detected
  --limit N            deliveries to show (default 50, at most 500)
  -o, --output FORMAT  table or json
  --url URL, --key KEY, --profile NAME
                       server, API key and profile (see airlock login)
`

func runWebhook(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("webhook", "want a subcommand: create, ls, rm or deliveries")
	}
	verb := args[0]
	switch verb {
	case "create", "ls", "list", "rm", "delete", "deliveries":
	default:
		return errUsage("webhook", "unknown subcommand %q (want create, ls, rm or deliveries)", verb)
	}
	fs := newFlagSet("webhook "+verb, webhookUsage, std.err)
	var (
		srv    serverFlags
		out    outputFlags
		events []string
	)
	srv.register(fs)
	out.register(fs, false)
	fs.Func("event", "", func(v string) error {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				events = append(events, t)
			}
		}
		return nil
	})
	limit := fs.Int("limit", 50, "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	switch verb {
	case "create":
		if len(pos) != 1 {
			return errUsage("webhook create", "want one URL")
		}
		req := airlock.CreateWebhookRequest{URL: pos[0], Events: events}
		if err := req.Validate(); err != nil {
			return errUsage("webhook create", "%s", airlock.ErrorMessage(err))
		}
	case "ls", "list":
		if len(pos) != 0 {
			return errUsage("webhook ls", "unexpected argument %q", pos[0])
		}
	case "rm", "delete":
		if len(pos) == 0 {
			return errUsage("webhook rm", "want one or more IDs")
		}
	case "deliveries":
		if len(pos) != 1 {
			return errUsage("webhook deliveries", "want one ID")
		}
		if *limit < 1 || *limit > 500 {
			return errUsage("webhook deliveries", "--limit must be from 1 to 500")
		}
	}
	if len(events) > 0 && verb != "create" {
		return errUsage("webhook "+verb, "--event goes with create only")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fail := func(err error) error { return apiFailed(std, err, &srv) }
	switch verb {
	case "create":
		w, err := c.CreateWebhook(ctx, airlock.CreateWebhookRequest{URL: pos[0], Events: events})
		if err != nil {
			return fail(err)
		}
		switch {
		case out.json(std):
			return writeJSON(std.out, w)
		case out.format == formatTable:
			return writeRecord(std.out, w)
		}
		fmt.Fprintf(std.out, "%s\n%s\n", w.ID, w.Secret)
		fmt.Fprintln(std.err, "airlock: the second line is the signing secret; it is not shown again")
		return nil
	case "ls", "list":
		ws, err := c.ListWebhooks(ctx)
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			if ws == nil {
				ws = []*airlock.Webhook{}
			}
			return writeJSON(std.out, ws)
		}
		t := newTable(std.out, "ID", "URL", "EVENTS", "CREATED")
		for _, w := range ws {
			evs := strings.Join(w.Events, ",")
			if evs == "" {
				evs = "(all)"
			}
			t.row(w.ID, w.URL, evs, w.CreatedAt.Local().Format(time.DateTime))
		}
		return t.flush()
	case "deliveries":
		p, err := c.WebhookDeliveries(ctx, pos[0], "", *limit)
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, p)
		}
		t := newTable(std.out, "DELIVERY", "EVENT", "TYPE", "STATE", "ATTEMPTS", "STATUS", "ERROR")
		for _, d := range p.Deliveries {
			t.row(d.ID, d.EventID, d.EventType, d.State, d.Attempts, d.LastStatus, d.LastError)
		}
		return t.flush()
	}
	// rm
	var failed error
	for _, id := range pos {
		if err := c.DeleteWebhook(ctx, id); err != nil {
			failed = fail(err)
			continue
		}
		fmt.Fprintln(std.out, id)
	}
	return failed
}
