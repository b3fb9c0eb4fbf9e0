package testpg_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testpg"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// Two tests' databases are separate, and each is usable.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := testpg.NewDatabase(t), testpg.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share a DSN: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE x (n int)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := cb.Exec(ctx, `SELECT * FROM x`); err == nil {
		t.Fatal("a table of one database is visible in the other")
	}
	var user string
	if err := cb.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != "postgres" {
		t.Fatalf("current_user %q, %v", user, err)
	}
}

// A server of its own: stopped, its directory is gone and its socket
// refuses connections.
func TestStartStop(t *testing.T) {
	if _, err := testpg.BinDir(); err != nil {
		testreq.Skip(t, err.Error())
	}
	ctx := context.Background()
	srv, err := testpg.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.Dir()
	if err := srv.CreateDatabase(ctx, "one"); err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("server directory %s left: %v", dir, err)
	}
	if c, err := pgx.Connect(ctx, srv.DSN("one")); err == nil {
		c.Close(ctx)
		t.Fatal("a stopped server accepted a connection")
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestDatabaseName(t *testing.T) {
	for _, name := range []string{"TestX", "TestX/sub case", string(make([]byte, 200))} {
		got := testpg.DatabaseName(name)
		if len(got) > 63 || len(got) == 0 {
			t.Errorf("DatabaseName(%q) = %q: %d bytes", name, got, len(got))
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				t.Errorf("DatabaseName(%q) = %q has %q", name, got, r)
			}
		}
	}
	if testpg.DatabaseName("a") == testpg.DatabaseName("a") {
		t.Error("two names for one test are the same")
	}
}

// A database's URL connects like its DSN.
func TestNewDatabaseURL(t *testing.T) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, testpg.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var db string
	if err := c.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil || !strings.HasPrefix(db, "t_testnewdatabaseurl_") {
		t.Fatalf("current_database %q, %v", db, err)
	}
}

// Kill leaves no process of the server (its children run in sessions of
// their own), and Restart brings it back with what was committed.
func TestKillRestart(t *testing.T) {
	if _, err := testpg.BinDir(); err != nil {
		testreq.Skip(t, err.Error())
	}
	ctx := context.Background()
	srv, err := testpg.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		srv.Kill()
		if c2, err := pgx.Connect(ctx, srv.DSN("postgres")); err == nil {
			c2.Close(ctx)
			t.Fatalf("round %d: a killed server accepted a connection", round)
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatalf("round %d: restart after kill: %v", round, err)
		}
		c2, err := pgx.Connect(ctx, srv.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = c2.QueryRow(ctx, `SELECT n FROM kept`).Scan(&n)
		c2.Close(ctx)
		if err != nil || n != 42 {
			t.Fatalf("round %d: after restart: %d %v", round, n, err)
		}
	}
	// Killed and stopped without a restart: nothing left, not even the
	// shared memory a killed server leaves.
	pid, err := os.ReadFile(filepath.Join(srv.Dir(), "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(pid), "\n")
	if len(lines) < 7 || len(strings.Fields(lines[6])) != 2 {
		t.Fatalf("postmaster.pid without a shared memory line:\n%s", pid)
	}
	shmid, _ := strconv.Atoi(strings.Fields(lines[6])[1])
	srv.Kill()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &unix.SysvShmDesc{}); !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
		t.Errorf("shared memory %d of the killed server is left: %v", shmid, err)
	}
}
