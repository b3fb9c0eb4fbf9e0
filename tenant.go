package airlock

import "time"

// Tenant owns API keys, executions and artifacts. Tenants never see each
// other's records.
type Tenant struct {
	ID         string `json:"tenant_id"`
	Name       string `json:"name"`
	FirstParty bool   `json:"first_party"`
	// Isolation is the operator's choice of the weakest isolation the
	// tenant's code runs under ("airlock tenant set NAME --isolation
	// vm"); "" leaves the floor that FirstParty sets. It raises the floor
	// and never lowers it (see IsolationFloor), so it is also the
	// tenant's default when its requests ask for nothing.
	Isolation Isolation `json:"isolation,omitempty"`
	// Guard is the tenant's guard policy ("" is GuardWarn).
	Guard     GuardPolicy `json:"guard,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
}

// APIKey is a bearer key. Only its hash is stored; the secret is shown
// once. A tenant key (RoleTenant) acts for its tenant on every surface;
// an operator key (RoleAdmin) belongs to no tenant (TenantID is empty)
// and opens only the admin API.
type APIKey struct {
	ID       string `json:"key_id"`
	TenantID string `json:"tenant_id,omitempty"`
	// Name tells keys apart in lists and in the audit log ("" for keys
	// made before keys had names).
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	Hash      string    `json:"-"`
	Prefix    string    `json:"prefix"` // first characters, to tell keys apart
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the key stops working.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RevokedAt, when set, is when the key was revoked: it works no more.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// LastUsedAt is when the key last authenticated a request, to within
	// KeyTouchInterval.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// ValidateTenantName checks a tenant name: 1-64 characters of a-z, 0-9
// and '-', starting with a letter.
func ValidateTenantName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64 && name[0] >= 'a' && name[0] <= 'z'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
	}
	if !ok {
		return Problem(EINVALID, "invalid-tenant-name", "invalid tenant name: use 1-64 characters of a-z, 0-9 and '-', starting with a letter")
	}
	return nil
}
