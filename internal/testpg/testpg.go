package testpg

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// The test binary's shared server, started at the first NewDatabase.
var shared struct {
	mu      sync.Mutex
	srv     *Server
	err     error
	started bool
	stopped bool
}

var dbSeq atomic.Int64

// Main runs the package's tests and then stops the shared server, if one
// was started, and removes its directory: call it from TestMain as
// os.Exit(testpg.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "testpg: stopping the test server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.stopped = true
	if shared.srv == nil {
		return nil
	}
	err := shared.srv.Stop()
	shared.srv = nil
	return err
}

// Shared returns the test binary's server, starting it at the first call;
// the test is skipped through testreq if PostgreSQL is not installed, and
// fails if it is but does not start. The package must stop it with Main.
func Shared(t testing.TB) *Server {
	t.Helper()
	if _, err := BinDir(); err != nil {
		testreq.Skip(t, err.Error())
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.stopped {
		t.Fatal("testpg: the shared server is stopped (Main has returned)")
	}
	if !shared.started {
		shared.started = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shared.srv, shared.err = Start(ctx)
		cancel()
	}
	if shared.err != nil {
		t.Fatalf("testpg: start PostgreSQL: %v", shared.err)
	}
	return shared.srv
}

// NewDatabase creates an empty database of its own for the test on the
// shared server, dropped when the test ends, and returns its DSN.
func NewDatabase(t testing.TB) string {
	t.Helper()
	srv, name := newDatabase(t)
	return srv.DSN(name)
}

// NewDatabaseURL is NewDatabase returning a postgres:// URL (what
// airlockd's --store takes).
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	srv, name := newDatabase(t)
	return srv.URL(name)
}

func newDatabase(t testing.TB) (*Server, string) {
	t.Helper()
	srv := Shared(t)
	name := DatabaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("testpg: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.DropDatabase(ctx, name); err != nil {
			t.Errorf("testpg: drop database %s: %v", name, err)
		}
	})
	return srv, name
}

// DatabaseName makes a unique database name from a test's name: lower
// case letters, digits and underscores, at most 63 bytes.
func DatabaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	suffix := fmt.Sprintf("_%d_%d", os.Getpid(), dbSeq.Add(1))
	base := b.String()
	if max := 63 - len(suffix) - 2; len(base) > max {
		base = base[:max]
	}
	return "t_" + base + suffix
}
