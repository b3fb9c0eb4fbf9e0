package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/client"
)

const keysUsage = `usage:
  airlock keys ls [-o json|table]
  airlock keys create [--name NAME] [--expires 720h|2027-01-01T00:00:00Z] [--format airlock|e2b] [-o json|table]
  airlock keys revoke KEY_ID [-o json|table]

The tenant's own API keys (/v1/keys), made and revoked with the tenant's
key: to rotate one, create a new key, move the clients to it, then revoke
the old one (both work until then). A revoked key is refused at once on
every surface. The operator manages every tenant's keys with
'airlock admin key'.

  ls      every key of the tenant, revoked ones too: never a secret
  create  prints the new key on stdout (the whole record with -o json):
          it is shown this once
  revoke  revokes a key (the one in use too)

flags:
  --name NAME          a name to tell the key apart in lists and the audit log
  --expires WHEN       a duration from now (720h) or a time (RFC 3339)
  --format F           airlock (alk_..., the default) or e2b (e2b_ and 40
                       hex digits, for E2B SDKs that check the format)
  -o, --output FORMAT  table (default) or json
  --url URL, --key KEY, --profile NAME
                       server, API key and profile (see airlock login)
`

func runKeys(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("keys", "want a subcommand: ls, create or revoke")
	}
	verb := args[0]
	switch verb {
	case "ls", "list", "create", "revoke", "rm":
	default:
		return errUsage("keys", "unknown subcommand %q (want ls, create or revoke)", verb)
	}
	fs := newFlagSet("keys "+verb, keysUsage, std.err)
	var (
		srv                   serverFlags
		out                   outputFlags
		name, expires, format string
	)
	srv.register(fs)
	out.register(fs, false)
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&expires, "expires", "", "")
	fs.StringVar(&format, "format", "", "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	switch verb {
	case "ls", "list":
		if len(pos) != 0 {
			return errUsage("keys ls", "unexpected argument %q", pos[0])
		}
		keys, err := c.ListKeys(ctx)
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		if out.json(std) {
			return writeJSON(std.out, map[string]any{"keys": keys})
		}
		t := newTable(std.out, "KEY_ID", "NAME", "PREFIX", "CREATED", "LAST_USED", "EXPIRES", "REVOKED")
		for _, k := range keys {
			t.row(k.ID, k.Name, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339), when(k.LastUsedAt), when(k.ExpiresAt), when(k.RevokedAt))
		}
		return t.flush()
	case "create":
		if len(pos) != 0 {
			return errUsage("keys create", "unexpected argument %q", pos[0])
		}
		req := client.CreateKeyRequest{Name: name, Format: format}
		if expires != "" {
			t, err := parseExpiry(expires)
			if err != nil {
				return errUsage("keys create", "%v", err)
			}
			req.ExpiresAt = &t
		}
		k, err := c.CreateKey(ctx, req)
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		if out.json(std) {
			return writeJSON(std.out, k)
		}
		fmt.Fprintln(std.out, k.Key)
		fmt.Fprintf(std.err, "airlock: created key %s (%s); it is shown this once\n", k.ID, printableText(k.Name))
		return nil
	default: // revoke
		if len(pos) != 1 {
			return errUsage("keys revoke", "want one KEY_ID")
		}
		k, err := c.RevokeKey(ctx, pos[0])
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		if out.json(std) {
			return writeJSON(std.out, k)
		}
		fmt.Fprintf(std.out, "key %s revoked\n", k.ID)
		return nil
	}
}

// when is a time for a table, "-" for none.
func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// parseExpiry reads --expires: a duration from now or an RFC 3339 time.
func parseExpiry(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d).UTC().Truncate(time.Second), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("--expires %q: want a duration (720h) or a time (2027-01-01T00:00:00Z)", s)
}
