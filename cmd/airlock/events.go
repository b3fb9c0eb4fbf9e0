package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
)

const eventsUsage = `usage:
  airlock events [--tenant NAME] [--limit N] [--before ID] [-o json|table] [--state-dir DIR]

Lists the abuse events of this node's store, newest first: every tenant's,
or one tenant's with --tenant. Each says the detector (mining, scanning,
fork-bomb, dns-tunnel), the tenant, the session or execution, what was
seen and measured, and what was done (killed, killed,quarantined,
recorded). A tenant sees its own with GET /v1/events.

flags:
  --tenant NAME    only this tenant's events
  --limit N        at most N events (default 50, at most 500)
  --before ID      events recorded before this one (the last ID of a page)
  -o json          one JSON object per line (--json: deprecated)
  --state-dir DIR  the node's state directory (default $AIRLOCK_STATE_DIR,
                   else /var/lib/airlock)
`

func runEvents(ctx context.Context, args []string, std stdio) error {
	deprecated(std, "events", "airlock admin events")
	fs := newFlagSet("events", eventsUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	tenant := fs.String("tenant", "", "")
	limit := fs.Int("limit", 50, "")
	before := fs.String("before", "", "")
	var out outputFlags
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return usageError(std.err, "events", "events takes no arguments")
	}
	if *limit < 1 || *limit > 500 {
		return usageError(std.err, "events", "--limit must be from 1 to 500")
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	names := map[string]string{}
	ts, err := db.ListTenants(ctx)
	if err != nil {
		return err
	}
	f := airlock.AbuseEventFilter{Limit: *limit, Before: *before}
	for _, t := range ts {
		names[t.ID] = t.Name
		if t.Name == *tenant {
			f.TenantID = t.ID
		}
	}
	if *tenant != "" && f.TenantID == "" {
		return fmt.Errorf("%w: %q", errNoTenant, *tenant)
	}
	evs, err := db.ListAbuseEvents(ctx, f)
	if err != nil {
		return err
	}
	if out.json(std) {
		enc := json.NewEncoder(std.out)
		for _, ev := range evs {
			if err := enc.Encode(struct {
				*airlock.AbuseEvent
				Tenant string `json:"tenant"`
			}{ev, names[ev.TenantID]}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTENANT\tDETECTOR\tACTION\tSESSION/EXECUTION\tEVIDENCE\tID")
	for _, ev := range evs {
		owner := ev.SessionID
		if owner == "" {
			owner = ev.ExecutionID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Time.UTC().Format(time.RFC3339), printableText(names[ev.TenantID]),
			ev.Detector, ev.Action, owner, printableText(evidenceText(ev.Evidence)), ev.ID)
	}
	return tw.Flush()
}

// evidenceText is an event's figures as key=value, in key order.
func evidenceText(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
