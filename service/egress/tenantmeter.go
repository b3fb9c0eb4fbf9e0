package egress

import "math"

// TenantMeter counts what each tenant's sandboxes move through the proxy
// against the tenant's daily budget (package quota's ledger implements
// it). ChargeEgress counts n bytes (0: only asks) and returns what the
// tenant may still move today: 0 or less once the budget is used up.
type TenantMeter interface {
	ChargeEgress(tenantID string, n int64) (remaining int64)
}

// noMeter is the meter of a node without tenant budgets.
type noMeter struct{}

func (noMeter) ChargeEgress(string, int64) int64 { return math.MaxInt64 }

var _ TenantMeter = noMeter{}

// tenantLeft is what the tenant of a may still move today.
func (a *attachment) tenantLeft() int64 { return a.s.cfg.Tenants.ChargeEgress(a.req.TenantID, 0) }

// cutTenant cuts every connection of the tenant's sandboxes: its day's
// budget is used up. New ones are refused until the next UTC day.
func (s *Service) cutTenant(tenantID string) {
	s.mu.RLock()
	var all []*attachment
	for _, a := range s.bySrc {
		if a.req.TenantID == tenantID {
			all = append(all, a)
		}
	}
	s.mu.RUnlock()
	for _, a := range all {
		a.cutAll(ReasonTenantQuota)
	}
}

// ReasonTenantQuota is the reason of a connection cut or refused because
// its tenant used up its egress bytes of the day.
const ReasonTenantQuota = "tenant-quota-exceeded"
