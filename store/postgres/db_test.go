package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testpg"
	"github.com/airlockhq/airlock/store/migrations"
	"github.com/airlockhq/airlock/store/postgres"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  postgres.Config
		ok   bool
	}{
		{"url", postgres.Config{DSN: "postgres://airlock@db.internal:5432/airlock"}, true},
		{"key value", postgres.Config{DSN: "host=/run/postgresql dbname=airlock"}, true},
		{"empty", postgres.Config{}, false},
		{"not a dsn", postgres.Config{DSN: "postgres://a:b@[::1"}, false},
		{"bad option", postgres.Config{DSN: "host=x connect_timeout=soon"}, false},
		{"negative conns", postgres.Config{DSN: "host=x", MaxConns: -1}, false},
		{"negative timeout", postgres.Config{DSN: "host=x", ConnectTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("Validate: code %q, want %q", airlock.ErrorCode(err), airlock.EINVALID)
			}
		})
	}
	// A password never shows in the error.
	err := postgres.Config{DSN: "postgres://u:s3cret@host/db?connect_timeout=soon"}.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Validate of a bad URL with a password: %v", err)
	}
}

func rawConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// The migrations carry the SQLite store's version numbers, and every one
// is recorded once however many times (and by however many nodes at
// once) the store is opened.
func TestMigrationsOnceAcrossNodes(t *testing.T) {
	ours, err := migrations.For("postgres")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := migrations.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	version := func(ms []migrations.Migration) []int {
		var vs []int
		for _, m := range ms {
			vs = append(vs, m.Version)
		}
		return vs
	}
	if len(ours) == 0 || !slices.Equal(version(ours), version(theirs)) {
		t.Fatalf("migration versions %v, SQLite's %v: they must match", version(ours), version(theirs))
	}

	dsn := testpg.NewDatabase(t)
	const nodes = 6
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for range nodes {
		wg.Go(func() {
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
			if err != nil {
				errs <- err
				return
			}
			errs <- db.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a node opening at once with the others: %v", err)
		}
	}
	openDSN(t, dsn, time.Now).Close()
	raw := rawConn(t, dsn)
	rows, err := raw.Query(context.Background(), `SELECT name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range ours {
		want = append(want, m.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("schema_migrations %v, want %v", names, want)
	}
	// The lock is released: nobody holds an advisory lock.
	var held int
	if err := raw.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'`).Scan(&held); err != nil || held != 0 {
		t.Errorf("advisory locks held after migrating: %d %v", held, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dsn := testpg.NewDatabase(t)
	openDSN(t, dsn, time.Now).Close()
	raw := rawConn(t, dsn)
	if _, err := raw.Exec(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded on a database from a newer binary")
	}
	if !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("error %v does not say the schema is newer", err)
	}
}

// wantUnavailable checks err is the store's EUNAVAILABLE domain error of
// the given type, with a retry hint, a message naming the store and the
// cause kept.
func wantUnavailable(t *testing.T, what string, err error, typ string) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: %v (%T), want a domain error", what, err, err)
	}
	if ae.Code != airlock.EUNAVAILABLE || ae.Type != typ || !strings.Contains(ae.Message, "metadata store (PostgreSQL)") ||
		airlock.RetryAfterOf(err) <= 0 || ae.Err == nil {
		t.Fatalf("%s: %+v, want %s/%s with a message naming the store, a RetryAfter and the cause", what, ae, airlock.EUNAVAILABLE, typ)
	}
	if got := problem.Status(airlock.ErrorCode(err)); got != 503 {
		t.Fatalf("%s: HTTP status %d, want 503", what, got)
	}
}

// A server that goes away (its processes killed, as in a crash): every
// call fails with store-unavailable (a 503 with Retry-After, never a
// crash or an internal error), a store cannot be opened on it, and once
// it is back the same store serves again with everything it had
// acknowledged.
func TestServerLost(t *testing.T) {
	if _, err := testpg.BinDir(); err != nil {
		testreq.Skip(t, err.Error())
	}
	ctx := context.Background()
	srv, err := testpg.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if err := srv.CreateDatabase(ctx, "airlock"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("airlock")
	db := openDSN(t, dsn, time.Now)
	tn := &airlock.Tenant{Name: "acme"}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for range 20 {
		e := &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash}
		if err := db.CreateExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Status, e.Stdout = airlock.StatusCompleted, "kept"
		if err := db.FinishExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, e.ID)
	}

	srv.Kill()
	ops := []struct {
		name string
		do   func() error
	}{
		{"CreateExecution", func() error {
			return db.CreateExecution(ctx, &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash})
		}},
		{"Execution", func() error { _, err := db.Execution(ctx, tn.ID, acked[0]); return err }},
		{"TenantByKeyHash", func() error { _, err := db.TenantByKeyHash(ctx, "h"); return err }},
		{"ListExecutions", func() error {
			_, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID})
			return err
		}},
		{"LiveSessions", func() error { _, err := db.LiveSessions(ctx); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			wantUnavailable(t, op.name+" with the server gone", op.do(), airlock.ProblemStoreUnavailable)
		})
	}
	_, err = postgres.Open(ctx, postgres.Config{DSN: dsn, ConnectTimeout: time.Second})
	wantUnavailable(t, "Open with the server gone", err, airlock.ProblemStoreUnavailable)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool connects again by itself.
	var page []*airlock.Execution
	testreq.Eventually(t, 30*time.Second, "the store to serve again", func() bool {
		page, err = db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 100})
		return err == nil
	})
	var got []string
	for _, e := range page {
		if e.Status != airlock.StatusCompleted {
			t.Errorf("execution %s: %s after the crash, want completed", e.ID, e.Status)
		}
		got = append(got, e.ID)
	}
	slices.Sort(got)
	slices.Sort(acked)
	if !slices.Equal(got, acked) {
		t.Errorf("after the server came back: %d executions %v, want the %d acknowledged %v", len(got), got, len(acked), acked)
	}
}

// Another connection holding a lock the store needs: the store's
// statements wait for the lock timeout, then fail with store-busy (a 503
// that says when to retry); once the lock goes they succeed and nothing
// written before is lost.
func TestLockHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.NewDatabase(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := &airlock.Tenant{Name: "before"}
	if err := db.CreateTenant(ctx, before); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, dsn)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wantUnavailable(t, "CreateTenant while the table is locked", db.CreateTenant(ctx, &airlock.Tenant{Name: "during"}), airlock.ProblemStoreBusy)
	_, err = db.TenantByName(ctx, "before")
	wantUnavailable(t, "TenantByName while the table is locked", err, airlock.ProblemStoreBusy)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("two calls took %v with a 200ms lock timeout", took)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTenant(ctx, &airlock.Tenant{Name: "after"}); err != nil {
		t.Fatalf("CreateTenant after the lock went: %v", err)
	}
	if got, err := db.TenantByName(ctx, "before"); err != nil || got.ID != before.ID {
		t.Fatalf("the tenant written before: %+v %v", got, err)
	}
}

// stallProxy forwards TCP connections on loopback to the server's unix
// socket until stalled: then it forwards nothing more (a server gone from
// the network, or stuck), without closing anything.
type stallProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	stalled chan struct{} // closed while stalled
	conns   []net.Conn
}

func newStallProxy(t *testing.T, socket string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", socket)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	return p
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled
			p.mu.Unlock()
			if stalled != nil {
				<-stalled // never closed: the bytes are held
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = make(chan struct{})
}

// cut closes every connection (and lets the held bytes go, to nowhere).
func (p *stallProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

func (p *stallProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// A server that stops answering (not refusing: silent) makes each call
// fail with store-unavailable after the store's operation timeout,
// never hang.
func TestServerStopsAnswering(t *testing.T) {
	ctx := context.Background()
	srv := testpg.Shared(t)
	name := "stall_" + strings.ToLower(airlock.NewID())
	if err := srv.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.DropDatabase(context.Background(), name) })
	proxy := newStallProxy(t, filepath.Join(srv.Dir(), ".s.PGSQL.5432"))
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", proxy.port(), name)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, OpTimeout: 500 * time.Millisecond, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn := &airlock.Tenant{Name: "acme"}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	proxy.stall()
	defer proxy.cut() // before Close: pgx waits for a silent server's connections to end
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"TenantByID", func() error { _, err := db.TenantByID(ctx, tn.ID); return err }},
		{"CreateExecution", func() error {
			return db.CreateExecution(ctx, &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash})
		}},
	} {
		start := time.Now()
		err := op.do()
		took := time.Since(start)
		wantUnavailable(t, op.name+" on a silent server", err, airlock.ProblemStoreUnavailable)
		if took > 5*time.Second {
			t.Errorf("%s took %v with a 500ms operation timeout", op.name, took)
		}
	}
	// The caller's own deadline is the caller's: not the store's failure.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = db.TenantByID(cctx, tn.ID)
	if err == nil || airlock.ErrorCode(err) == airlock.EUNAVAILABLE {
		t.Errorf("a call whose own deadline passed: %v, want a plain error", err)
	}
}
