package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const adminUsage = `usage:
  airlock admin tenant create NAME
  airlock admin tenant ls
  airlock admin tenant show NAME
  airlock admin tenant set NAME [--isolation container|kernel|vm|default]
        [--quota KEY=VALUE ...] [--broker-scope SCOPE ...] [--no-broker-scopes]
        [--quarantine [--reason TEXT] | --unquarantine]
  airlock admin tenant rm NAME [--keep-data]
  airlock admin key create TENANT [--name NAME] [--expires 720h|2027-01-01T00:00:00Z] [--format airlock|e2b]
  airlock admin key ls [TENANT]     (no TENANT: the operator keys)
  airlock admin key revoke KEY_ID
  airlock admin usage [--tenant NAME]
  airlock admin events [--tenant NAME] [--limit N]
  airlock admin audit [--action ACTION] [--limit N]

Administers tenants and keys through the server's admin API
(/v1/admin/...), so it works the same on one node and on a fleet that
shares a PostgreSQL store. Every change is recorded in the audit log with
the operator key's name.

  tenant set  --isolation raises the tenant's isolation floor (default drops
              it); --quota KEY=VALUE overrides a default quota (VALUE
              "unlimited" lifts it, "default" drops the override; keys:
              sessions, runs, executions_per_minute, vcpu, memory,
              sandbox_seconds_per_day, egress_bytes_per_day);
              --broker-scope (repeatable) sets the broker scopes the tenant
              is granted, replacing the ones it had (--no-broker-scopes
              takes them all back: live sessions' calls stop at once);
              --quarantine refuses the tenant new runs and sessions.
  tenant rm   ends the tenant's live sessions, revokes its keys and removes
              it with all its records; --keep-data keeps the tenant
              (quarantined, keys revoked) and its records.
  key create  prints the new key on stdout: it is shown this once.

flags (every subcommand):
  --url URL            server (default $AIRLOCK_URL, else the profile's,
                       else http://127.0.0.1:8080)
  --admin-key KEY      an operator key (default $AIRLOCK_ADMIN_KEY, else
                       the profile's, else <state-dir>/admin.key when
                       readable)
  --profile NAME       the profile to use (default $AIRLOCK_PROFILE, else
                       the current one); 'airlock login' with an operator
                       key stores one. A FILE (a path, or a name ending in
                       .json) is read as the previous release's
                       {"url": ..., "admin_key": ...} file (deprecated)
  -o, --output FORMAT  table (default) or json (the server's answer);
                       --json is a deprecated spelling of -o json
`

const envAdminKey = "AIRLOCK_ADMIN_KEY"

// adminFlags locate the server and the operator key.
type adminFlags struct {
	url, key, profile string
	out               outputFlags
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "url", "", "")
	fs.StringVar(&a.key, "admin-key", "", "")
	fs.StringVar(&a.profile, "profile", "", "")
	a.out.register(fs, true)
}

// legacyProfile is the admin profile file of the previous release,
// {"url": ..., "admin_key": ...}; --profile FILE still reads one.
type legacyProfile struct {
	URL      string `json:"url"`
	AdminKey string `json:"admin_key"`
}

func legacyProfilePath() string {
	dir, err := configDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "profile.json")
}

// isProfileFile tells a --profile FILE of the previous release from a
// profile's name.
func isProfileFile(v string) bool {
	return strings.ContainsRune(v, filepath.Separator) || strings.HasSuffix(v, ".json")
}

// readLegacyProfile reads the old profile file at path; a missing file
// is no error unless it was named.
func readLegacyProfile(path string, named bool) (legacyProfile, error) {
	var p legacyProfile
	if path == "" {
		return p, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &p); err != nil {
			return p, fmt.Errorf("profile %s: %v", path, err)
		}
	case named || !errors.Is(err, os.ErrNotExist):
		return p, fmt.Errorf("profile: %v", err)
	}
	return p, nil
}

// resolve returns the server URL and the operator key: flags, then the
// environment, then the profile (--profile NAME, $AIRLOCK_PROFILE, the
// current one; or the old profile.json), then this host's admin.key.
func (a *adminFlags) resolve() (string, string, error) {
	var p legacyProfile
	if isProfileFile(a.profile) {
		lp, err := readLegacyProfile(a.profile, true)
		if err != nil {
			return "", "", err
		}
		p = lp
	} else {
		ps, err := loadProfiles()
		if err != nil {
			return "", "", err
		}
		_, e, err := ps.pick(a.profile)
		if err != nil {
			return "", "", err
		}
		if e != nil {
			p = legacyProfile{URL: e.URL, AdminKey: e.AdminKey}
		}
		if p.AdminKey == "" {
			lp, err := readLegacyProfile(legacyProfilePath(), false)
			if err != nil {
				return "", "", err
			}
			p = legacyProfile{URL: firstOf(p.URL, lp.URL), AdminKey: lp.AdminKey}
		}
	}
	u := firstOf(a.url, os.Getenv(envURL), p.URL, fallbackURL)
	key := firstOf(a.key, os.Getenv(envAdminKey), p.AdminKey)
	if key == "" {
		key = readKeyFile(filepath.Join(stateDirDefault(), "admin.key"))
	}
	if key == "" {
		return "", "", errors.New("no operator key: run 'airlock login --url URL' with an operator key, give --admin-key, or set $AIRLOCK_ADMIN_KEY; the first start of airlockd writes one to <state-dir>/admin.key")
	}
	return strings.TrimRight(u, "/"), key, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// adminClient calls the admin API.
type adminClient struct {
	base, key string
	http      *http.Client
}

// call sends a request and decodes a 2xx JSON answer into out (if not
// nil); a problem becomes an error with its type and detail.
func (c *adminClient) call(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var p struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		}
		json.Unmarshal(b, &p)
		typ := strings.TrimPrefix(p.Type, "urn:airlock:problem:")
		if p.Detail == "" {
			p.Detail = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, typ, printableText(p.Detail))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: %v", method, path, err)
		}
	}
	return b, nil
}

func runAdmin(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("admin", "want a subcommand: tenant, key, usage, events or audit")
	}
	sub, rest := args[0], args[1:]
	verb := ""
	if sub == "tenant" || sub == "key" {
		if len(rest) == 0 {
			return errUsage("admin "+sub, "want a subcommand")
		}
		verb, rest = rest[0], rest[1:]
	}
	fs := newFlagSet("admin "+sub, adminUsage, std.err)
	var af adminFlags
	af.register(fs)
	o := &adminOpts{}
	o.register(fs)
	pos, err := parseArgs(fs, rest)
	if err != nil {
		return flagErr(err)
	}
	base, key, err := af.resolve()
	if err != nil {
		return err
	}
	c := &adminClient{base: base, key: key, http: &http.Client{Timeout: 5 * time.Minute}}
	run := adminCommands[sub+" "+verb]
	if sub != "tenant" && sub != "key" {
		run = adminCommands[sub]
	}
	if run == nil {
		return errUsage("admin", "unknown subcommand %q", strings.TrimSpace(sub+" "+verb))
	}
	return run(ctx, c, o, pos, af.out.json(std), std)
}

// adminOpts are the flags of every admin subcommand (each takes the ones
// that concern it).
type adminOpts struct {
	isolation, reason, name, expires, format, tenant, action string
	quotas, scopes                                           []string
	noScopes, quarantine, unquarantine, keepData             bool
	limit                                                    int
	set                                                      map[string]bool
}

func (o *adminOpts) register(fs *flag.FlagSet) {
	o.set = map[string]bool{}
	str := func(p *string, name string) {
		fs.Func(name, "", func(v string) error { *p = v; o.set[name] = true; return nil })
	}
	str(&o.isolation, "isolation")
	str(&o.reason, "reason")
	str(&o.name, "name")
	str(&o.expires, "expires")
	str(&o.format, "format")
	str(&o.tenant, "tenant")
	str(&o.action, "action")
	fs.Func("quota", "", func(v string) error { o.quotas = append(o.quotas, v); return nil })
	fs.Func("broker-scope", "", func(v string) error { o.scopes = append(o.scopes, v); return nil })
	fs.BoolVar(&o.noScopes, "no-broker-scopes", false, "")
	fs.BoolVar(&o.quarantine, "quarantine", false, "")
	fs.BoolVar(&o.unquarantine, "unquarantine", false, "")
	fs.BoolVar(&o.keepData, "keep-data", false, "")
	fs.IntVar(&o.limit, "limit", 0, "")
}

type adminCommand func(ctx context.Context, c *adminClient, o *adminOpts, pos []string, asJSON bool, std stdio) error

var adminCommands = map[string]adminCommand{}

func wantArgs(pos []string, n int, what string) error {
	if len(pos) != n {
		return errUsage("admin", "want %s", what)
	}
	return nil
}

// printRaw prints a server answer indented.
func printRaw(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		_, err = w.Write(b)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func pathEscape(s string) string { return url.PathEscape(s) }

// deprecated points the user of an old local admin command at its
// replacement, which works through the API on any node and any store.
func deprecated(std stdio, old, replacement string) {
	fmt.Fprintf(std.err, "airlock %s is deprecated: it opens this node's SQLite store directly and does nothing for a PostgreSQL fleet; use '%s', which calls the admin API\n", old, replacement)
}
