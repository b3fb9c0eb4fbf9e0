package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

const tenantUsage = `usage:
  airlock tenant create NAME [--state-dir DIR]
  airlock tenant set NAME [--first-party[=false]] [--isolation container|kernel|vm|default] [--guard off|warn|block] [--quota KEY=VALUE ...] [--state-dir DIR]
  airlock tenant ls [-o json|table] [--state-dir DIR]
  airlock tenant usage [NAME] [-o json|table] [--state-dir DIR]
  airlock tenant quarantine NAME [--reason TEXT] [--state-dir DIR]
  airlock tenant unquarantine NAME [--state-dir DIR]

Administers the tenants in this node's store, <state-dir>/airlock.db; run it
on the server host, as the user that owns the state directory (root).

  create  adds a tenant; NAME is 1-64 characters of a-z, 0-9 and '-',
          starting with a letter. Give it a key with 'airlock key create'.
  set     --first-party marks the tenant first-party: its code may then
          also run with isolation "container" (the namespaces backend, on
          the host's kernel) when a request asks for it. --first-party=false
          takes that back: the tenant's code runs only behind a separate
          kernel (gVisor, a microVM), which is every tenant's default.
          --isolation raises the tenant's floor: with vm its code runs
          only in a microVM (airlockd --microvm), also when a request
          asks for nothing or for something weaker (403
          isolation-not-allowed; 503 isolation-unavailable on a node
          without one); kernel keeps a first-party tenant off the host's
          kernel. It never lowers the floor --first-party gives; default
          drops the setting.
          --guard sets what the static check of code before it runs does:
          off (nothing), warn (run and report the findings; the default)
          or block (refuse code with a high or critical finding: 422
          guard-blocked, nothing runs).
          --quota KEY=VALUE (repeatable) overrides one of airlockd's
          default quotas (airlockd --quota) for the tenant; VALUE
          "unlimited" lifts it, "default" drops the override. Keys:
            sessions                 live sessions
            runs                     one-shot runs at once
            executions_per_minute    runs, session execs and cells
            vcpu                     vCPU of live sandboxes (e.g. 4, 0.5)
            memory                   memory of live sandboxes (e.g. 8GiB)
            sandbox_seconds_per_day  sandbox wall time per UTC day (or 8h)
            egress_bytes_per_day     egress bytes per UTC day (e.g. 10GiB)
          A running airlockd applies it within its --quota-flush (10 s).
  ls      lists the tenants, oldest first, with their isolation floor,
          their guard policy,
          whether they are quarantined, and their quota overrides
  usage   shows each tenant's (or NAME's) use against its quotas, read
          from the store: SESSIONS, VCPU and MEMORY from the live sessions
          recorded (their sizes); RUNS from the one-shot executions
          recorded as running (a run still waiting for a slot is not
          recorded yet, and one-shot runs' vCPU and memory are not
          recorded, so VCPU and MEMORY leave them out); EXEC/MIN from the
          executions recorded in the last 60 s; SANDBOX-S and EGRESS from
          the day's counters as airlockd last wrote them (at most its
          --quota-flush behind). Limits are the tenant's overrides, else
          the defaults the node's airlockd last started with. GET
          /v1/usage shows a tenant airlockd's own, exact view.
  quarantine    refuses the tenant new runs and sessions (403
          tenant-quarantined); the abuse monitor does it itself with
          airlockd --abuse-response quarantine ('airlock events' says why)
  unquarantine  lifts a quarantine

flags:
  --state-dir DIR  the node's state directory (default $AIRLOCK_STATE_DIR,
                   else /var/lib/airlock)
`

func runTenant(ctx context.Context, args []string, std stdio) error {
	if !setsNodeOnlyFields(args) {
		deprecated(std, "tenant", "airlock admin tenant")
	}
	if len(args) == 0 {
		return usageError(std.err, "tenant", "want a subcommand: create, set, ls or usage")
	}
	switch args[0] {
	case "create":
		return runTenantCreate(ctx, args[1:], std)
	case "ls", "list":
		return runTenantList(ctx, args[1:], std)
	case "set":
		return runTenantSet(ctx, args[1:], std)
	case "usage":
		return runTenantUsage(ctx, args[1:], std)
	case "quarantine":
		return runTenantQuarantine(ctx, args[1:], std, true)
	case "unquarantine":
		return runTenantQuarantine(ctx, args[1:], std, false)
	case "-h", "--help", "help":
		fmt.Fprint(std.err, tenantUsage)
		return nil
	}
	return usageError(std.err, "tenant", "unknown subcommand %q (want create, set, ls or usage)", args[0])
}

// validTenantName checks a tenant name: 1-64 characters of [a-z0-9-],
// starting with a letter.
func validTenantName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64 && name[0] >= 'a' && name[0] <= 'z'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
	}
	if !ok {
		return fmt.Errorf("invalid tenant name %q: use 1-64 characters of a-z, 0-9 and '-', starting with a letter", name)
	}
	return nil
}

func runTenantCreate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("tenant create", tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "tenant", "create wants one NAME")
	}
	name := pos[0]
	if err := validTenantName(name); err != nil {
		return err
	}
	db, err := openStore(ctx, *stateDir, false)
	if err != nil {
		return err
	}
	defer db.Close()
	t := &airlock.Tenant{ID: newID(), Name: name, CreatedAt: time.Now().UTC()}
	if err := db.CreateTenant(ctx, t); err != nil {
		if airlock.ErrorCode(err) == airlock.ECONFLICT {
			return fmt.Errorf("tenant %q already exists", name)
		}
		return err
	}
	fmt.Fprintf(std.out, "created tenant %s (%s)\n", t.Name, t.ID)
	return nil
}

func runTenantList(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("tenant ls", tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	var out outputFlags
	out.register(fs, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return usageError(std.err, "tenant", "ls takes no arguments")
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	ts, err := db.ListTenants(ctx)
	if err != nil {
		return err
	}
	overrides, err := db.TenantQuotas(ctx)
	if err != nil {
		return err
	}
	type row struct {
		*airlock.Tenant
		IsolationFloor airlock.Isolation   `json:"isolation_floor"`
		Quarantine     *airlock.Quarantine `json:"quarantine,omitempty"`
		Quotas         map[string]int64    `json:"quotas,omitempty"`
	}
	rows := make([]row, 0, len(ts))
	for _, t := range ts {
		q, err := db.TenantQuarantine(ctx, t.ID)
		if err != nil {
			return err
		}
		rows = append(rows, row{Tenant: t, IsolationFloor: t.IsolationFloor(), Quarantine: q, Quotas: overrides[t.ID]})
	}
	if out.json(std) {
		return writeJSON(std.out, map[string]any{"tenants": rows})
	}
	tb := newTable(std.out, "ID", "NAME", "FIRST-PARTY", "ISOLATION", "GUARD", "QUARANTINED", "CREATED", "QUOTAS")
	for _, r := range rows {
		quarantined := "no"
		if r.Quarantine != nil {
			quarantined = "since " + r.Quarantine.Since.UTC().Format(time.RFC3339)
		}
		tb.row(r.ID, r.Name, r.FirstParty, r.IsolationFloor, r.Guard.Effective(), quarantined, r.CreatedAt.UTC().Format(time.RFC3339), overrideText(r.Quotas))
	}
	return tb.flush()
}

// errNoTenant is returned when a command names a tenant that does not
// exist.
var errNoTenant = errors.New("no such tenant")

// setsNodeOnlyFields reports whether args are a "set" of what only this
// node-local command can set (--guard, --first-party: the admin API has
// no such fields), which is then no deprecated use.
func setsNodeOnlyFields(args []string) bool {
	if len(args) == 0 || args[0] != "set" {
		return false
	}
	for _, a := range args[1:] {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if name == "guard" || name == "first-party" {
			return true
		}
	}
	return false
}
