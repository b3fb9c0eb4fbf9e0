package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/store/sqlite"
)

// wantUnavailable checks err is the store's EUNAVAILABLE domain error of
// the given type, with a retry hint, a message naming the store and the
// cause kept.
func wantUnavailable(t *testing.T, what string, err error, typ string) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: %v (%T), want a domain error", what, err, err)
	}
	if ae.Code != airlock.EUNAVAILABLE || ae.Type != typ || !strings.Contains(ae.Message, "metadata store (SQLite)") ||
		airlock.RetryAfterOf(err) <= 0 || ae.Err == nil {
		t.Fatalf("%s: %+v, want %s/%s with a message naming the store, a RetryAfter and the cause", what, ae, airlock.EUNAVAILABLE, typ)
	}
	if got := airlock.ErrorCode(err); got != airlock.EUNAVAILABLE {
		t.Fatalf("%s: ErrorCode %q", what, got)
	}
}

// Another process holding the write lock: writes wait for the busy
// timeout, then fail with store-busy (a 503 that says when to retry, not
// a 500); reads go on; once the lock is released writes succeed and
// nothing written before (by either side) is lost.
func TestWriteLockHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	const busy = 300 * time.Millisecond
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := mustTenant(t, db, "before")
	exec := mustExecution(t, db, before.ID)

	// The other process: its own connection, holding BEGIN EXCLUSIVE.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `INSERT INTO tenants (id, name, created_at) VALUES ('held-id', 'held', 1)`); err != nil {
		t.Fatal(err)
	}

	writes := []struct {
		name string
		do   func() error
	}{
		{"create tenant", func() error { return db.CreateTenant(ctx, &airlock.Tenant{Name: "during"}) }},
		{"create execution", func() error {
			return db.CreateExecution(ctx, &airlock.Execution{TenantID: before.ID, Language: airlock.Python, CodeSHA256: "x"})
		}},
		{"finish execution", func() error {
			e := *exec
			e.Status, e.ExitCode, e.Stdout = airlock.StatusCompleted, 0, "done"
			return db.FinishExecution(ctx, &e)
		}},
		{"record egress", func() error {
			return db.RecordEgress(ctx, []*airlock.EgressEvent{{TenantID: before.ID, ExecutionID: exec.ID, Kind: airlock.EgressConnection, Verdict: airlock.VerdictAllowed, Time: time.Now()}})
		}},
		{"fail running executions", func() error { _, err := db.FailRunningExecutions(ctx, "restart"); return err }},
		{"set first-party", func() error { return db.SetTenantFirstParty(ctx, before.ID, true) }},
	}
	for _, w := range writes {
		start := time.Now()
		err := w.do()
		took := time.Since(start)
		wantUnavailable(t, w.name, err, sqlite.ProblemStoreBusy)
		if took < busy/2 || took > busy+5*time.Second {
			t.Errorf("%s: failed after %s; the busy timeout is %s", w.name, took, busy)
		}
	}
	// Reads do not wait for the writer (WAL).
	if got, err := db.TenantByName(ctx, "before"); err != nil || got.ID != before.ID {
		t.Fatalf("read while locked: %v, %v", got, err)
	}
	if got, err := db.Execution(ctx, before.ID, exec.ID); err != nil || got.Status != airlock.StatusRunning {
		t.Fatalf("read execution while locked: %+v, %v", got, err)
	}

	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if err := w.do(); err != nil {
			t.Errorf("%s after the lock was released: %v", w.name, err)
		}
	}
	for _, name := range []string{"before", "held", "during"} {
		if _, err := db.TenantByName(ctx, name); err != nil {
			t.Errorf("tenant %s: %v", name, err)
		}
	}
	got, err := db.Execution(ctx, before.ID, exec.ID)
	if err != nil || got.Status != airlock.StatusCompleted || got.Stdout != "done" {
		t.Errorf("execution after the lock: %+v, %v", got, err)
	}
	if n, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: before.ID}); err != nil || len(n) != 2 {
		t.Errorf("executions after the lock: %d, %v", len(n), err)
	}
}

// A database on a full disk, and one that cannot be opened, are
// store-unavailable, not internal errors.
func TestStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	t.Run("cannot open", func(t *testing.T) {
		dir := t.TempDir()
		_, err := sqlite.Open(ctx, sqlite.Config{Path: dir}) // a directory
		wantUnavailable(t, "open a directory", err, sqlite.ProblemStoreUnavailable)
	})
	t.Run("disk full", func(t *testing.T) {
		if os.Geteuid() != 0 {
			testreq.Skip(t, "skipped: needs root (mounts a small tmpfs)")
		}
		dir := t.TempDir()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
			testreq.Skipf(t, "skipped: cannot mount a tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tn := mustTenant(t, db, "acme")
		// Fill the rest of the file system.
		f, err := os.Create(filepath.Join(dir, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		block := make([]byte, 64<<10)
		for {
			if _, err := f.Write(block); err != nil {
				break
			}
		}
		f.Close()
		e := &airlock.Execution{TenantID: tn.ID, Language: airlock.Python, CodeSHA256: "x", Stdout: strings.Repeat("x", 1<<20)}
		wantUnavailable(t, "write on a full disk", db.CreateExecution(ctx, e), sqlite.ProblemStoreUnavailable)
		// Room again: the store serves and kept what it had.
		if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateExecution(ctx, e); err != nil {
			t.Fatalf("write after space was freed: %v", err)
		}
		if _, err := db.TenantByName(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
	})
}
