package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/airlockhq/airlock"
)

// runTenantSet changes a tenant's policy: whether it is first-party
// (which sets its isolation floor) and its guard policy.
func runTenantSet(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("tenant set", tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	var firstParty *bool
	fs.BoolFunc("first-party", "", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		firstParty = &b
		return nil
	})
	var guardPolicy *airlock.GuardPolicy
	fs.Func("guard", "", func(v string) error {
		p, err := airlock.ParseGuardPolicy(v)
		if err != nil {
			return fmt.Errorf("want off, warn or block")
		}
		guardPolicy = &p
		return nil
	})
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err, 2)
	}
	if len(pos) != 1 {
		return usageError(std.err, "tenant", 2, "set wants one NAME")
	}
	if firstParty == nil && guardPolicy == nil {
		return usageError(std.err, "tenant", 2, "set wants something to set: --first-party[=false] or --guard off|warn|block")
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.TenantByName(ctx, pos[0])
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return fmt.Errorf("%w %q", errNoTenant, pos[0])
	}
	if err != nil {
		return err
	}
	if firstParty != nil {
		if err := db.SetTenantFirstParty(ctx, t.ID, *firstParty); err != nil {
			return err
		}
		t.FirstParty = *firstParty
	}
	if guardPolicy != nil {
		if err := db.SetTenantGuard(ctx, t.ID, *guardPolicy); err != nil {
			return err
		}
		t.Guard = *guardPolicy
	}
	fmt.Fprintf(std.out, "tenant %s: first-party %v, isolation floor %s, guard %s\n",
		printableText(t.Name), t.FirstParty, t.IsolationFloor(), t.Guard.Effective())
	return nil
}
