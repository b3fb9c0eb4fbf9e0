package airlock

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Role is what a key may do.
type Role string

// Roles of a key.
const (
	// RoleTenant keys act for one tenant: its sessions, executions,
	// artifacts, usage and its own keys. They never reach the admin API.
	RoleTenant Role = "tenant"
	// RoleAdmin keys are the operator's: they belong to no tenant, open
	// the admin API (/v1/admin/...) and nothing else.
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleTenant || r == RoleAdmin }

// Problem types of authentication.
const (
	ProblemKeyRevoked = "key-revoked"
	ProblemKeyExpired = "key-expired"
)

// KeyTouchInterval is how stale a key's LastUsedAt may get: a request
// writes it only when the stored value is older than this, so a busy key
// costs one write a minute, not one a request.
const KeyTouchInterval = time.Minute

// MaxKeyNameBytes bounds a key's name.
const MaxKeyNameBytes = 100

// ValidateKeyName checks a key's name: up to MaxKeyNameBytes of
// printable characters ("" is allowed).
func ValidateKeyName(name string) error {
	if len(name) > MaxKeyNameBytes {
		return Errorf(EINVALID, "key name is longer than %d bytes", MaxKeyNameBytes)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return Errorf(EINVALID, "key name has a character that does not print")
		}
	}
	if strings.TrimSpace(name) != name {
		return Errorf(EINVALID, "key name starts or ends with a space")
	}
	return nil
}

// Usable says whether the key may authenticate at now: nil, or an
// EUNAUTHORIZED error naming why not (revoked, expired).
func (k *APIKey) Usable(now time.Time) error {
	switch {
	case k.RevokedAt != nil:
		return Problem(EUNAUTHORIZED, ProblemKeyRevoked, "this API key was revoked")
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return Problem(EUNAUTHORIZED, ProblemKeyExpired, "this API key has expired")
	case !k.Role.Valid():
		return ErrUnauthorized
	}
	return nil
}

// KeyFilter selects keys to list.
type KeyFilter struct {
	// TenantID lists the tenant's keys; "" with Role RoleAdmin lists the
	// operator's keys.
	TenantID string
	Role     Role
}

// KeyStore keeps API keys (their hashes) and their state.
type KeyStore interface {
	// CreateAPIKey stores k; an empty Role is RoleTenant, which needs a
	// TenantID; a RoleAdmin key must have none.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeyByHash returns the key with the hash, whatever its state;
	// ErrNotFound if none.
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// APIKey returns the key with the ID, whatever its state; ErrNotFound
	// if none.
	APIKey(ctx context.Context, id string) (*APIKey, error)
	// ListAPIKeys returns the keys the filter selects, revoked ones too,
	// oldest first.
	ListAPIKeys(ctx context.Context, f KeyFilter) ([]*APIKey, error)
	// RevokeAPIKey marks the key revoked at the store's time (a key
	// revoked before keeps its time) and returns it; ErrNotFound if none.
	RevokeAPIKey(ctx context.Context, id string) (*APIKey, error)
	// TouchAPIKey records that the key was used at the time.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// KeyResolver is what authentication needs of a store.
type KeyResolver interface {
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	TenantByID(ctx context.Context, id string) (*Tenant, error)
}

// Principal is who a request authenticated as: a key and, for a tenant
// key, its tenant (nil for an operator key).
type Principal struct {
	Key    *APIKey
	Tenant *Tenant
}

// IsAdmin reports whether the principal is the operator.
func (p *Principal) IsAdmin() bool { return p != nil && p.Key != nil && p.Key.Role == RoleAdmin }

// Authenticate resolves a secret to its key and tenant, checking the
// key's state at now on every call (no cache, so a revocation is seen at
// once by every node sharing the store). An unknown, revoked or expired
// key is EUNAUTHORIZED; a store that fails is its error. The key's
// LastUsedAt is written when older than KeyTouchInterval (a failure to
// write it is ignored: it is a hint, not a record).
func Authenticate(ctx context.Context, keys KeyResolver, secret string, now time.Time) (*Principal, error) {
	if secret == "" || len(secret) > 512 {
		return nil, ErrUnauthorized
	}
	k, err := keys.APIKeyByHash(ctx, HashAPIKey(secret))
	if ErrorCode(err) == ENOTFOUND {
		return nil, ErrUnauthorized
	} else if err != nil {
		return nil, err
	}
	if err := k.Usable(now); err != nil {
		return nil, err
	}
	p := &Principal{Key: k}
	if k.Role == RoleTenant {
		t, err := keys.TenantByID(ctx, k.TenantID)
		if ErrorCode(err) == ENOTFOUND {
			return nil, ErrUnauthorized
		} else if err != nil {
			return nil, err
		}
		p.Tenant = t
	}
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) >= KeyTouchInterval {
		if t, ok := keys.(interface {
			TouchAPIKey(ctx context.Context, id string, at time.Time) error
		}); ok {
			_ = t.TouchAPIKey(ctx, k.ID, now)
		}
	}
	return p, nil
}

// KeyByID checks that the key with the ID still works at now (a token
// issued under it, such as a signed URL or an E2B sandbox token):
// EUNAUTHORIZED if it is unknown, revoked or expired.
func KeyByID(ctx context.Context, keys interface {
	APIKey(ctx context.Context, id string) (*APIKey, error)
}, id string, now time.Time) (*APIKey, error) {
	if id == "" {
		return nil, ErrUnauthorized
	}
	k, err := keys.APIKey(ctx, id)
	if ErrorCode(err) == ENOTFOUND {
		return nil, fmt.Errorf("key %s: %w", id, ErrUnauthorized)
	} else if err != nil {
		return nil, err
	}
	if err := k.Usable(now); err != nil {
		return nil, err
	}
	return k, nil
}
