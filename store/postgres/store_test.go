package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testpg"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/storetest"
)

var _ storetest.Store = (*postgres.DB)(nil)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// openDSN opens a store on the database, closed when the test ends.
func openDSN(t *testing.T, dsn string, now func() time.Time) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestStore runs the store suite shared with the SQLite store, each test
// on a database of its own on one throwaway server.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) string { return testpg.NewDatabase(t) },
		Open: func(t *testing.T, dsn string, now func() time.Time) storetest.Store {
			t.Helper()
			return openDSN(t, dsn, now)
		},
		OpenNode: func(t *testing.T, dsn, node string) storetest.Store {
			t.Helper()
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, NodeID: node})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		DefaultListLimit: postgres.DefaultListLimit,
		MaxListLimit:     postgres.MaxListLimit,
	})
}
