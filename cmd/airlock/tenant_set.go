package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
)

// runTenantSet changes a tenant's policy: whether it is first-party and
// the isolation it asks for (which together set its isolation floor),
// its guard policy and its quota overrides.
func runTenantSet(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("tenant set", tenantUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	var ch tenantChanges
	ch.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "tenant", "set wants one NAME")
	}
	if ch.firstParty == nil && ch.guardPolicy == nil && ch.isolation == nil && len(ch.quotas) == 0 {
		return usageError(std.err, "tenant", "set wants something to set: --first-party[=false], --isolation container|kernel|vm|default, --guard off|warn|block or --quota KEY=VALUE")
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
	if ch.firstParty != nil {
		if err := db.SetTenantFirstParty(ctx, t.ID, *ch.firstParty); err != nil {
			return err
		}
		t.FirstParty = *ch.firstParty
	}
	if ch.isolation != nil {
		if err := db.SetTenantIsolation(ctx, t.ID, *ch.isolation); err != nil {
			return err
		}
		t.Isolation = *ch.isolation
	}
	if ch.guardPolicy != nil {
		if err := db.SetTenantGuard(ctx, t.ID, *ch.guardPolicy); err != nil {
			return err
		}
		t.Guard = *ch.guardPolicy
	}
	if ch.firstParty != nil || ch.guardPolicy != nil || ch.isolation != nil {
		fmt.Fprintf(std.out, "tenant %s: first-party %v, isolation floor %s, guard %s\n",
			printableText(t.Name), t.FirstParty, t.IsolationFloor(), t.Guard.Effective())
	}
	for _, c := range ch.quotas {
		if c.drop {
			if err := db.DeleteTenantQuota(ctx, t.ID, string(c.key)); err != nil {
				return err
			}
			fmt.Fprintf(std.out, "tenant %s: quota %s is the default again\n", printableText(t.Name), c.key)
			continue
		}
		if err := db.SetTenantQuota(ctx, t.ID, string(c.key), c.limit); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "tenant %s: quota %s=%s\n", printableText(t.Name), c.key, c.key.Format(c.limit))
	}
	if len(ch.quotas) > 0 {
		fmt.Fprintln(std.out, "(a running airlockd applies quota changes within --quota-flush, 10 s by default)")
	}
	return nil
}

// quotaChange is one --quota of tenant set.
type quotaChange struct {
	key   quota.Key
	limit int64
	drop  bool
}

// tenantChanges are what tenant set's flags ask to change (nil: nothing).
type tenantChanges struct {
	quotas      []quotaChange
	firstParty  *bool
	guardPolicy *airlock.GuardPolicy
	isolation   *airlock.Isolation
}

func (c *tenantChanges) register(fs *flag.FlagSet) {
	fs.Func("quota", "", func(v string) error {
		name, val, ok := strings.Cut(v, "=")
		if ok && strings.TrimSpace(val) == "default" {
			k := quota.Key(strings.TrimSpace(name))
			if !k.Valid() {
				_, _, err := quota.ParseAssignment(v)
				return err
			}
			c.quotas = append(c.quotas, quotaChange{key: k, drop: true})
			return nil
		}
		k, n, err := quota.ParseAssignment(v)
		if err != nil {
			return err
		}
		c.quotas = append(c.quotas, quotaChange{key: k, limit: n})
		return nil
	})
	fs.BoolFunc("first-party", "", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		c.firstParty = &b
		return nil
	})
	fs.Func("guard", "", func(v string) error {
		p, err := airlock.ParseGuardPolicy(v)
		if err != nil {
			return fmt.Errorf("want off, warn or block")
		}
		c.guardPolicy = &p
		return nil
	})
	fs.Func("isolation", "", func(v string) error {
		if strings.TrimSpace(v) == "default" {
			none := airlock.Isolation("")
			c.isolation = &none
			return nil
		}
		i, err := airlock.ParseIsolation(v)
		if err != nil {
			return fmt.Errorf("want container, kernel (gvisor), vm or default")
		}
		c.isolation = &i
		return nil
	})
}
