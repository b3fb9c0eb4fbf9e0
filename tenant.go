package airlock

import "time"

// Tenant owns API keys, executions and artifacts. Tenants never see each
// other's records.
type Tenant struct {
	ID         string `json:"id"`
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

// APIKey is a bearer key. Only its hash is stored; the secret is shown once.
type APIKey struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"`
	Hash      string    `json:"-"`
	Prefix    string    `json:"prefix"` // first characters, to tell keys apart
	CreatedAt time.Time `json:"created_at"`
}
