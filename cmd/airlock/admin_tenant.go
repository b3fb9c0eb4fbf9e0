package main

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/airlockhq/airlock/service/quota"
)

// adminTenantView is a tenant as the admin API answers it.
type adminTenantView struct {
	ID             string           `json:"id"`
	Name           string           `json:"name"`
	IsolationFloor string           `json:"isolation_floor"`
	Guard          string           `json:"guard"`
	Quotas         map[string]int64 `json:"quotas"`
	BrokerScopes   []string         `json:"broker_scopes"`
	Quarantined    bool             `json:"quarantined"`
	CreatedAt      string           `json:"created_at"`
}

func init() {
	adminCommands["tenant create"] = adminTenantCreate
	adminCommands["tenant ls"] = adminTenantList
	adminCommands["tenant list"] = adminTenantList
	adminCommands["tenant show"] = adminTenantShow
	adminCommands["tenant set"] = adminTenantSet
	adminCommands["tenant rm"] = adminTenantDelete
	adminCommands["tenant delete"] = adminTenantDelete
}

func adminTenantCreate(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one NAME"); err != nil {
		return err
	}
	var t adminTenantView
	b, err := c.call(ctx, "POST", "/v1/admin/tenants", map[string]string{"name": pos[0]}, &t)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	fmt.Fprintf(std.out, "created tenant %s (%s)\n", printableText(t.Name), t.ID)
	return nil
}

func adminTenantList(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 0, "no arguments"); err != nil {
		return err
	}
	var out struct {
		Tenants []adminTenantView `json:"tenants"`
	}
	b, err := c.call(ctx, "GET", "/v1/admin/tenants", nil, &out)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tISOLATION\tQUARANTINED\tBROKER-SCOPES\tQUOTAS")
	for _, t := range out.Tenants {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", t.ID, printableText(t.Name), t.IsolationFloor, t.Quarantined,
			printableText(strings.Join(t.BrokerScopes, ",")), quotaText(t.Quotas))
	}
	return tw.Flush()
}

func quotaText(q map[string]int64) string {
	if len(q) == 0 {
		return "-"
	}
	var parts []string
	for k, v := range q {
		parts = append(parts, k+"="+quota.Key(k).Format(v))
	}
	sort.Strings(parts)
	return printableText(strings.Join(parts, ","))
}

func adminTenantShow(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one NAME"); err != nil {
		return err
	}
	b, err := c.call(ctx, "GET", "/v1/admin/tenants/"+pathEscape(pos[0]), nil, nil)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	return writeRecord(std.out, b)
}

func adminTenantSet(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one NAME"); err != nil {
		return err
	}
	patch := map[string]any{}
	if o.set["isolation"] {
		iso := o.isolation
		if iso == "default" {
			iso = ""
		}
		patch["isolation"] = iso
	}
	if len(o.quotas) > 0 {
		qs := map[string]any{}
		for _, a := range o.quotas {
			name, v, _ := strings.Cut(a, "=")
			if strings.TrimSpace(v) == "default" {
				qs[strings.TrimSpace(name)] = nil
				continue
			}
			k, n, err := quota.ParseAssignment(a)
			if err != nil {
				return errUsage("admin tenant set", "--quota %v", err)
			}
			qs[string(k)] = n
		}
		patch["quotas"] = qs
	}
	switch {
	case o.noScopes && len(o.scopes) > 0:
		return errUsage("admin tenant set", "give --broker-scope or --no-broker-scopes, not both")
	case o.noScopes:
		patch["broker_scopes"] = []string{}
	case len(o.scopes) > 0:
		patch["broker_scopes"] = o.scopes
	}
	switch {
	case o.quarantine && o.unquarantine:
		return errUsage("admin tenant set", "give --quarantine or --unquarantine, not both")
	case o.quarantine:
		patch["quarantined"] = true
		patch["quarantine_reason"] = o.reason
	case o.unquarantine:
		patch["quarantined"] = false
	}
	if len(patch) == 0 {
		return errUsage("admin tenant set", "want something to set: --isolation, --quota, --broker-scope, --no-broker-scopes, --quarantine or --unquarantine")
	}
	b, err := c.call(ctx, "PATCH", "/v1/admin/tenants/"+pathEscape(pos[0]), patch, nil)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	return writeRecord(std.out, b)
}

func adminTenantDelete(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one NAME"); err != nil {
		return err
	}
	q := ""
	if o.keepData {
		q = "?" + url.Values{"keep_data": {"true"}}.Encode()
	}
	if _, err := c.call(ctx, "DELETE", "/v1/admin/tenants/"+pathEscape(pos[0])+q, nil, nil); err != nil {
		return err
	}
	if o.keepData {
		fmt.Fprintf(std.out, "tenant %s retired: sessions ended, keys revoked, quarantined; its records are kept\n", printableText(pos[0]))
	} else {
		fmt.Fprintf(std.out, "tenant %s deleted with its records\n", printableText(pos[0]))
	}
	return nil
}
