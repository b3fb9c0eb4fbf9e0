package e2e_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestStoreBusyOverHTTP: another process holding the database's write
// lock. A one-shot run that cannot be recorded is refused with a 503
// store-busy problem that says when to retry (not a 500), and leaves no
// sandbox behind (the stack's clean-host check). A run that was recorded
// before the lock was taken is answered once the lock goes, with its
// result, and its record is complete: nothing acknowledged is lost.
func TestStoreBusyOverHTTP(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	const busy = 500 * time.Millisecond
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := teststack.New(t, teststack.Options{Store: db})
	tn := st.NewTenant(t, "busy")

	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock := func() *sql.Conn {
		t.Helper()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	unlock := func(conn *sql.Conn) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	execute := func(code string) (*http.Response, map[string]any) {
		t.Helper()
		body := strings.NewReader(`{"language":"bash","code":` + strconv.Quote(code) + `,"timeout_sec":30}`)
		req, _ := http.NewRequest(http.MethodPost, st.URL+"/v1/execute", body)
		req.Header.Set("Authorization", "Bearer "+tn.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("decode the answer (%d): %v", resp.StatusCode, err)
		}
		return resp, doc
	}

	// 1. Locked before the run: refused, and says when to retry.
	held := lock()
	resp, doc := execute("echo never")
	unlock(held)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasSuffix(doc["type"].(string), "store-busy") ||
		resp.Header.Get("Retry-After") == "" || !strings.Contains(doc["detail"].(string), "metadata store") {
		t.Fatalf("a run while the store is locked: %d %v Retry-After %q, want 503 store-busy naming the store with Retry-After",
			resp.StatusCode, doc, resp.Header.Get("Retry-After"))
	}
	page, err := tn.Client.ListExecutions(ctx, 0, "")
	if err != nil || len(page.Executions) != 0 {
		t.Fatalf("records after a refused run: %+v %v, want none", page, err)
	}

	// 2. Locked while the run runs (its record was written): the answer
	// waits for the lock to go, and nothing is lost.
	type answer struct {
		resp *http.Response
		doc  map[string]any
	}
	done := make(chan answer, 1)
	mark := "/tmp/busy-go"
	go func() {
		r, d := execute("touch /tmp/busy-started; echo started; while [ ! -e " + mark + " ]; do sleep 0.05; done; echo finished")
		done <- answer{r, d}
	}()
	var running *airlock.Execution
	waitFor(t, 60*time.Second, "the run's record", func() bool {
		page, err := tn.Client.ListExecutions(ctx, 0, "")
		if err != nil || len(page.Executions) != 1 || page.Executions[0].Status != airlock.StatusRunning {
			return false
		}
		running = page.Executions[0]
		return true
	})
	var tmp string
	waitFor(t, 60*time.Second, "the program to start (its mark in its /tmp)", func() bool {
		marks, _ := filepath.Glob(filepath.Join(st.Backend.Config().StateDir, "sandboxes", "*", "disk", "tmp", "busy-started"))
		if len(marks) != 1 {
			return false
		}
		tmp = filepath.Dir(marks[0])
		return true
	})
	// Let the program end while the lock is held (the sandbox's /tmp is
	// a directory of its run directory on the host).
	held = lock()
	if err := os.WriteFile(filepath.Join(tmp, "busy-go"), nil, 0o644); err != nil {
		unlock(held)
		t.Fatal(err)
	}
	// The runner retries the record's finish for longer than the busy
	// timeout: hold the lock across several of those timeouts.
	select {
	case a := <-done:
		unlock(held)
		t.Fatalf("answered while the store was locked: %d %v", a.resp.StatusCode, a.doc)
	case <-time.After(4 * busy):
	}
	unlock(held)
	a := <-done
	if a.resp.StatusCode != http.StatusOK || a.doc["stdout"] != "started\nfinished\n" {
		t.Fatalf("the run after the lock went: %d %v", a.resp.StatusCode, a.doc)
	}
	rec, err := tn.Client.Execution(ctx, running.ID)
	if err != nil || rec.Status != airlock.StatusCompleted || rec.Stdout != "started\nfinished\n" {
		t.Fatalf("its record: %+v %v", rec, err)
	}
}
