package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
)

// adminKeyView is a key as the API answers it.
type adminKeyView struct {
	KeyID      string     `json:"key_id"`
	TenantID   string     `json:"tenant_id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Prefix     string     `json:"prefix"`
	Key        string     `json:"key"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func init() {
	adminCommands["key create"] = adminKeyCreate
	adminCommands["key ls"] = adminKeyList
	adminCommands["key list"] = adminKeyList
	adminCommands["key revoke"] = adminKeyRevoke
}

func adminKeyCreate(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one TENANT"); err != nil {
		return err
	}
	body := map[string]any{"name": o.name}
	if o.expires != "" {
		if d, err := time.ParseDuration(o.expires); err == nil {
			body["expires_at"] = time.Now().Add(d).UTC().Format(time.RFC3339)
		} else if t, err := time.Parse(time.RFC3339, o.expires); err == nil {
			body["expires_at"] = t.UTC().Format(time.RFC3339)
		} else {
			return errUsage("admin key create", "--expires %q: want a duration (720h) or a time (2027-01-01T00:00:00Z)", o.expires)
		}
	}
	if o.format != "" {
		body["format"] = o.format
	}
	var k adminKeyView
	b, err := c.call(ctx, "POST", "/v1/admin/tenants/"+pathEscape(pos[0])+"/keys", body, &k)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	fmt.Fprintln(std.out, k.Key)
	fmt.Fprintf(std.err, "created key %s (%s) for tenant %s; it is shown this once\n", k.KeyID, printableText(k.Name), printableText(pos[0]))
	return nil
}

func adminKeyList(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	path := "/v1/admin/keys"
	switch len(pos) {
	case 0:
	case 1:
		path = "/v1/admin/tenants/" + pathEscape(pos[0]) + "/keys"
	default:
		return errUsage("admin key ls", "want at most one TENANT")
	}
	var out struct {
		Keys []adminKeyView `json:"keys"`
	}
	b, err := c.call(ctx, "GET", path, nil, &out)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY_ID\tNAME\tPREFIX\tCREATED\tLAST_USED\tEXPIRES\tREVOKED")
	for _, k := range out.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.KeyID, printableText(k.Name), printableText(k.Prefix),
			when(&k.CreatedAt), when(k.LastUsedAt), when(k.ExpiresAt), when(k.RevokedAt))
	}
	return tw.Flush()
}

func adminKeyRevoke(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
	if err := wantArgs(pos, 1, "one KEY_ID"); err != nil {
		return err
	}
	b, err := c.call(ctx, "DELETE", "/v1/admin/keys/"+pathEscape(pos[0]), nil, nil)
	if err != nil {
		return err
	}
	if asJSON {
		return printRaw(std.out, b)
	}
	fmt.Fprintf(std.out, "key %s revoked\n", printableText(pos[0]))
	return nil
}

// adminReport prints a report of the admin API (usage, events, audit).
func adminReport(path string) adminCommand {
	return func(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error {
		if err := wantArgs(pos, 0, "no arguments"); err != nil {
			return err
		}
		q := url.Values{}
		if o.tenant != "" {
			q.Set("tenant", o.tenant)
		}
		if o.action != "" {
			q.Set("action", o.action)
		}
		if o.limit > 0 {
			q.Set("limit", fmt.Sprint(o.limit))
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		b, err := c.call(ctx, "GET", path, nil, nil)
		if err != nil {
			return err
		}
		if asJSON {
			return printRaw(std.out, b)
		}
		return writeReport(std, b)
	}
}

func init() {
	adminCommands["usage"] = adminReport("/v1/admin/usage")
	adminCommands["events"] = adminReport("/v1/admin/events")
	adminCommands["audit"] = adminReport("/v1/admin/audit")
}

// writeReport prints an admin report as a table: usage as one row per
// tenant and quota, events and audit entries a row each; the cursor of
// the next page goes to stderr.
func writeReport(std stdio, b []byte) error {
	var u struct {
		Usage []struct {
			Tenant string               `json:"tenant"`
			Quotas []airlock.QuotaUsage `json:"quotas"`
		} `json:"usage"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return fmt.Errorf("the answer: %v", err)
	}
	if u.Usage != nil {
		t := newTable(std.out, "TENANT", "QUOTA", "USED", "LIMIT", "REMAINING", "WINDOW")
		for _, tu := range u.Usage {
			for _, q := range tu.Quotas {
				k := quota.Key(q.Quota)
				limit := k.Format(q.Limit)
				if q.Source == "tenant" {
					limit += "*"
				}
				t.row(tu.Tenant, q.Quota, k.Format(q.Used), limit, k.Format(q.Remaining), q.Window)
			}
		}
		return t.flush()
	}
	if err := writeListTable(std.out, b); err != nil {
		return err
	}
	if u.NextCursor != "" {
		fmt.Fprintf(std.err, "airlock: more: the next page is before=%s\n", u.NextCursor)
	}
	return nil
}
