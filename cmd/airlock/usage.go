package main

import (
	"context"
	"io"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
)

const quotaUsageUsage = `usage: airlock usage [-o json|table]

Shows the tenant's use of each of its quotas as the server counts it
(GET /v1/usage): what is used, the limit, what remains, and for the daily
quotas when the count starts again. A limit marked * is an override the
operator set for the tenant. The operator sees every tenant's with
'airlock admin usage'.

flags:
  -o, --output FORMAT  table (default) or json
  --url URL, --key KEY, --profile NAME
                       server, API key and profile (see airlock login)
`

func runQuotaUsage(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("usage", quotaUsageUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return errUsage("usage", "unexpected argument %q", pos[0])
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	u, err := c.Usage(ctx)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, u)
	}
	return writeQuotaTable(std.out, "", u.Quotas)
}

// writeQuotaTable prints quota rows, each with the tenant's name when
// tenant is not "".
func writeQuotaTable(w io.Writer, tenant string, qs []airlock.QuotaUsage) error {
	header := []string{"QUOTA", "USED", "LIMIT", "REMAINING", "WINDOW", "RESETS"}
	if tenant != "" {
		header = append([]string{"TENANT"}, header...)
	}
	t := newTable(w, header...)
	for _, q := range qs {
		k := quota.Key(q.Quota)
		limit, remaining := k.Format(q.Limit), k.Format(q.Remaining)
		if q.Source == "tenant" {
			limit += "*"
		}
		resets := ""
		if q.ResetsAt != nil {
			resets = q.ResetsAt.UTC().Format(time.RFC3339)
		}
		cells := []any{q.Quota, k.Format(q.Used), limit, remaining, q.Window, resets}
		if tenant != "" {
			cells = append([]any{tenant}, cells...)
		}
		t.row(cells...)
	}
	return t.flush()
}
