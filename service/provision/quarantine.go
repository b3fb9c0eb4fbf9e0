package provision

import (
	"context"

	"github.com/airlockhq/airlock"
)

// Quarantines says whether a tenant is quarantined (airlock.AbuseStore
// implements it).
type Quarantines interface {
	TenantQuarantine(ctx context.Context, tenantID string) (*airlock.Quarantine, error)
}

// checkQuarantine refuses a claim of a quarantined tenant.
func (p *Provisioner) checkQuarantine(ctx context.Context, t *airlock.Tenant) error {
	if p.cfg.Quarantines == nil {
		return nil
	}
	q, err := p.cfg.Quarantines.TenantQuarantine(ctx, t.ID)
	if err != nil {
		return err
	}
	if q == nil {
		return nil
	}
	return airlock.Problem(airlock.EFORBIDDEN, airlock.ProblemTenantQuarantined,
		"tenant %s is quarantined since %s (%s); an operator lifts it with: airlock admin tenant set %s --unquarantine",
		t.Name, q.Since.Format("2006-01-02T15:04:05Z"), q.Reason, t.Name)
}
