package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlite"
)

// clock is a fake clock that advances by step on every reading.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), step: time.Second}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// openAt opens a store at path, closed when the test ends.
func openAt(t *testing.T, path string, now func() time.Time) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Now: now})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// open opens a fresh store in a temporary directory.
func open(t *testing.T) *sqlite.DB {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "airlock.db"), newClock().Now)
}

func mustTenant(t *testing.T, db *sqlite.DB, name string) *airlock.Tenant {
	t.Helper()
	tn := &airlock.Tenant{Name: name}
	if err := db.CreateTenant(context.Background(), tn); err != nil {
		t.Fatalf("CreateTenant(%q): %v", name, err)
	}
	return tn
}

func mustExecution(t *testing.T, db *sqlite.DB, tenantID string, adjust ...func(*airlock.Execution)) *airlock.Execution {
	t.Helper()
	e := &airlock.Execution{TenantID: tenantID, Language: airlock.Python, CodeSHA256: "abc"}
	for _, f := range adjust {
		f(e)
	}
	if err := db.CreateExecution(context.Background(), e); err != nil {
		t.Fatalf("CreateExecution: %v", err)
	}
	return e
}

// wantCode fails the test unless err has the domain error code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := airlock.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (%v), want %q", what, got, err, code)
	}
}
