package template_test

import (
	"context"
	"sort"
	"sync"

	"github.com/airlockhq/airlock"
)

// memStore is an airlock.TemplateStore in memory (the SQL store's own
// suite is store/storetest; this keeps the service's tests on their own).
type memStore struct {
	mu   sync.Mutex
	byID map[string]airlock.Template
	live map[string]int // image -> live sessions
}

var _ airlock.TemplateStore = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{byID: map[string]airlock.Template{}, live: map[string]int{}}
}

func notFound() error {
	return airlock.Problem(airlock.ENOTFOUND, "template-not-found", "template not found")
}

func (m *memStore) CreateTemplate(ctx context.Context, t *airlock.Template) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.byID {
		if x.TenantID == t.TenantID && x.Name == t.Name {
			return airlock.Problem(airlock.ECONFLICT, "template-exists", "exists")
		}
	}
	m.byID[t.ID] = *t
	return nil
}

func (m *memStore) TemplateByName(ctx context.Context, tenantID, name string) (*airlock.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.byID {
		if x.TenantID == tenantID && x.Name == name {
			return &x, nil
		}
	}
	return nil, notFound()
}

func (m *memStore) TemplateByID(ctx context.Context, id string) (*airlock.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if x, ok := m.byID[id]; ok {
		return &x, nil
	}
	return nil, notFound()
}

func (m *memStore) ListTemplates(ctx context.Context, tenantID string) ([]airlock.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []airlock.Template
	for _, x := range m.byID {
		if x.TenantID == tenantID || x.TenantID == "" {
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memStore) UpdateTemplate(ctx context.Context, t *airlock.Template) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[t.ID]; !ok {
		return notFound()
	}
	m.byID[t.ID] = *t
	return nil
}

func (m *memStore) DeleteTemplate(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[id]; !ok {
		return notFound()
	}
	delete(m.byID, id)
	return nil
}

func (m *memStore) TemplateBytes(ctx context.Context, tenantID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, x := range m.byID {
		if x.TenantID == tenantID {
			n += x.SizeBytes
		}
	}
	return n, nil
}

func (m *memStore) FailBuildingTemplates(ctx context.Context, reason string) (int, error) {
	return 0, nil
}

func (m *memStore) LiveSessionsOnImage(ctx context.Context, image string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[image], nil
}
