package main

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// runTenantQuarantine is 'airlock tenant quarantine NAME [--reason TEXT]'
// and 'airlock tenant unquarantine NAME': the operator's side of the
// abuse monitor's quarantine.
func runTenantQuarantine(ctx context.Context, args []string, std stdio, on bool) error {
	verb := "unquarantine"
	if on {
		verb = "quarantine"
	}
	fs := newFlagSet("tenant "+verb, tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	reason := fs.String("reason", "quarantined by the operator", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "tenant", "%s wants one NAME", verb)
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.TenantByName(ctx, pos[0])
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return fmt.Errorf("%w: %q", errNoTenant, pos[0])
	} else if err != nil {
		return err
	}
	if on {
		if err := db.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: t.ID, Reason: *reason}); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "tenant %s is quarantined: new runs and sessions get 403 tenant-quarantined\n", t.Name)
		return nil
	}
	q, err := db.TenantQuarantine(ctx, t.ID)
	if err != nil {
		return err
	}
	if _, err := db.UnquarantineTenant(ctx, t.ID); err != nil {
		return err
	}
	if q == nil {
		fmt.Fprintf(std.out, "tenant %s was not quarantined\n", t.Name)
		return nil
	}
	fmt.Fprintf(std.out, "tenant %s is no longer quarantined (it was since %s: %s)\n", t.Name, q.Since.Format("2006-01-02T15:04:05Z"), printableText(q.Reason))
	return nil
}
