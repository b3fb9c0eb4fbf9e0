package seal_test

import (
	"context"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// memStore is a KeyStore in memory.
type memStore struct {
	mu   sync.Mutex
	keys map[string]*seal.TenantKey
}

var _ seal.KeyStore = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{keys: map[string]*seal.TenantKey{}} }

func (m *memStore) TenantKey(ctx context.Context, tenantID string) (*seal.TenantKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[tenantID]
	if !ok {
		return nil, airlock.Errorf(airlock.ENOTFOUND, "no key")
	}
	c := *k
	return &c, nil
}

func (m *memStore) CreateTenantKey(ctx context.Context, k *seal.TenantKey) (*seal.TenantKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.keys[k.TenantID]; ok {
		c := *old
		return &c, nil
	}
	c := *k
	m.keys[k.TenantID] = &c
	return k, nil
}

func (m *memStore) TenantKeys(ctx context.Context) ([]*seal.TenantKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*seal.TenantKey
	for _, k := range m.keys {
		c := *k
		out = append(out, &c)
	}
	return out, nil
}

func (m *memStore) RewrapTenantKey(ctx context.Context, tenantID, id, oldMK, newMK string, wrapped []byte, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[tenantID]
	if !ok || k.ID != id || k.MasterKeyID != oldMK {
		return airlock.Errorf(airlock.ECONFLICT, "changed")
	}
	k.MasterKeyID, k.Wrapped, k.RotatedAt = newMK, wrapped, &at
	return nil
}
