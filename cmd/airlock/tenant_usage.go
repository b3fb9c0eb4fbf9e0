package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
)

// overrideText renders a tenant's quota overrides: "sessions=2 vcpu=4",
// or "-" for none.
func overrideText(m map[string]int64) string {
	l := quota.Limits{}
	for k, v := range m {
		if quota.Key(k).Valid() {
			l[quota.Key(k)] = v
		}
	}
	if len(l) == 0 {
		return "-"
	}
	return l.String()
}

// usageRow is one tenant's row of 'airlock tenant usage'.
type usageRow struct {
	Tenant string               `json:"tenant"`
	ID     string               `json:"tenant_id"`
	Quotas []airlock.QuotaUsage `json:"quotas"`
}

// runTenantUsage shows the tenants' use against their quotas as the
// node's store has it (the usage text in tenant.go says what each
// column counts).
func runTenantUsage(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("tenant usage", tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	var out outputFlags
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 1 {
		return usageError(std.err, "tenant", "usage takes at most one NAME")
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	tenants, err := db.ListTenants(ctx)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		var one []*airlock.Tenant
		for _, t := range tenants {
			if t.Name == pos[0] {
				one = append(one, t)
			}
		}
		if len(one) == 0 {
			return fmt.Errorf("%w %q", errNoTenant, pos[0])
		}
		tenants = one
	}
	rows, knownDefaults, err := storeUsageRows(ctx, db, tenants, *stateDir, std)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if out.json(std) {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSESSIONS\tRUNS\tEXEC/MIN\tVCPU\tMEMORY\tSANDBOX-S\tEGRESS")
	for _, r := range rows {
		fmt.Fprint(tw, printableText(r.Tenant))
		for _, q := range r.Quotas {
			k := quota.Key(q.Quota)
			limit := k.Format(q.Limit)
			if q.Source == "unknown" {
				limit = "?"
			}
			if q.Source == "tenant" {
				limit += "*"
			}
			fmt.Fprintf(tw, "\t%s/%s", k.Format(q.Used), limit)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(std.out, "used/limit; * an override for the tenant")
	if !knownDefaults {
		fmt.Fprintf(std.out, "; ? airlockd has not written its defaults here (%s)", quota.DefaultsFile)
	}
	fmt.Fprintf(std.out, "; daily counts of %s UTC as last written\n", quota.Day(now))
	return nil
}

// storeUsageRows computes each tenant's use against its quotas from the
// store, as the usage text in tenant.go says; knownDefaults is false when
// airlockd has not written its default quotas to the state directory.
func storeUsageRows(ctx context.Context, db adminStore, tenants []*airlock.Tenant, stateDir string, std stdio) ([]usageRow, bool, error) {
	defaults, err := quota.ReadDefaults(filepath.Join(stateDir, quota.DefaultsFile))
	knownDefaults := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(std.err, "airlock: %v (limits shown are overrides only)\n", err)
	}
	overrides, err := db.TenantQuotas(ctx)
	if err != nil {
		return nil, false, err
	}
	now := time.Now().UTC()
	sessions, err := db.LiveSessions(ctx)
	if err != nil {
		return nil, false, err
	}
	execs, err := db.ExecutionCounts(ctx, now.Add(-time.Minute))
	if err != nil {
		return nil, false, err
	}
	daily, err := db.DailyUsage(ctx, quota.Day(now))
	if err != nil {
		return nil, false, err
	}
	type live struct{ sessions, millicpu, memory int64 }
	byTenant := map[string]*live{}
	for _, s := range sessions {
		l := byTenant[s.TenantID]
		if l == nil {
			l = &live{}
			byTenant[s.TenantID] = l
		}
		l.sessions++
		l.millicpu += int64(s.Limits.CPUs*1000 + 0.5)
		l.memory += s.Limits.MemoryBytes
	}
	resets := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	var rows []usageRow
	for _, t := range tenants {
		l := byTenant[t.ID]
		if l == nil {
			l = &live{}
		}
		volMiB, err := db.VolumeMiB(ctx, t.ID)
		if err != nil {
			return nil, false, err
		}
		used := map[quota.Key]int64{
			quota.VolumeBytes:          volMiB << 20,
			quota.Sessions:             l.sessions,
			quota.Runs:                 int64(execs[t.ID].RunningOneShot),
			quota.ExecutionsPerMinute:  int64(execs[t.ID].Since),
			quota.VCPU:                 l.millicpu,
			quota.Memory:               l.memory,
			quota.SandboxSecondsPerDay: daily[t.ID].SandboxMillis / 1000,
			quota.EgressBytesPerDay:    daily[t.ID].EgressBytes,
		}
		row := usageRow{Tenant: t.Name, ID: t.ID}
		for _, k := range quota.Keys() {
			q := airlock.QuotaUsage{Quota: string(k), Unit: k.Unit(), Window: k.Window(), Used: used[k], Limit: quota.Unlimited, Source: "default"}
			if v, ok := overrides[t.ID][string(k)]; ok {
				q.Limit, q.Source = v, "tenant"
			} else if v, ok := defaults[k]; ok {
				q.Limit = v
			} else if !knownDefaults {
				q.Source = "unknown"
			}
			q.Remaining = quota.Unlimited
			if q.Limit >= 0 {
				q.Remaining = max(q.Limit-q.Used, 0)
			}
			if k.Window() == quota.WindowDay {
				at := resets
				q.ResetsAt = &at
			}
			row.Quotas = append(row.Quotas, q)
		}
		rows = append(rows, row)
	}
	return rows, knownDefaults, nil
}
