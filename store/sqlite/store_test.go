package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

var _ storetest.Store = (*sqlite.DB)(nil)

// TestStore runs the store suite shared with the PostgreSQL store.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) string { return filepath.Join(t.TempDir(), "airlock.db") },
		Open: func(t *testing.T, path string, now func() time.Time) storetest.Store {
			t.Helper()
			db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Now: now})
			if err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		OpenNode: func(t *testing.T, path, node string) storetest.Store {
			t.Helper()
			db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, NodeID: node})
			if err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		DefaultListLimit: sqlite.DefaultListLimit,
		MaxListLimit:     sqlite.MaxListLimit,
	})
}
