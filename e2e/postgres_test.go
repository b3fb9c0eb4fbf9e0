package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestAirlockdOnPostgres runs airlockd with --store on a throwaway
// PostgreSQL server: a real run is recorded there (and not in SQLite)
// and read back; with the server gone a request gets a 503
// store-unavailable problem with Retry-After (the node does not crash);
// once the server is back the node serves again and the record is
// there. A second node, with a state directory of its own, started on
// the same database after the first has stopped, reads the first one's
// run with the first one's key: the records are the database's, not the
// node's.
func TestAirlockdOnPostgres(t *testing.T) {
	srv := startPostgres(t)
	ctx := context.Background()
	flags := append([]string{"--store", srv.URL("airlock"), "--no-egress"}, quiet...)

	n1, d1 := startNode(t, nodeOptions{name: "pg-one"}, flags...)
	tmp1 := n1.dir
	if !strings.Contains(d1.logs(), "metadata store: PostgreSQL") {
		t.Errorf("airlockd does not say it uses PostgreSQL:\n%s", d1.logs())
	}
	if _, err := os.Stat(filepath.Join(tmp1, "airlock.db")); !os.IsNotExist(err) {
		t.Errorf("airlockd on PostgreSQL made a SQLite file: %v", err)
	}
	key := n1.key()
	c1 := newClient(t, d1.url, key)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	e, err := c1.Execute(rctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo on-postgres; echo data > out.txt"})
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, e, 0, false, false)
	wantStdout(t, e, "on-postgres\n")
	got, err := c1.Execution(rctx, e.ID)
	if err != nil || got.Stdout != "on-postgres\n" || got.Status != airlock.StatusCompleted || len(got.Artifacts) != 1 {
		t.Fatalf("read back from the node: %+v, %v", got, err)
	}

	// The record is in PostgreSQL.
	raw, err := pgx.Connect(ctx, srv.DSN("airlock"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, status string
	var artifacts int
	err = raw.QueryRow(ctx, `SELECT e.stdout, e.status, (SELECT count(*) FROM artifacts a WHERE a.exec_id = e.exec_id)
		FROM executions e WHERE e.exec_id = $1`, e.ID).Scan(&stdout, &status, &artifacts)
	raw.Close(ctx)
	if err != nil || stdout != "on-postgres\n" || status != "completed" || artifacts != 1 {
		t.Fatalf("the run in PostgreSQL: stdout %q status %q artifacts %d, %v", stdout, status, artifacts, err)
	}

	// A node on PostgreSQL may be one of many: it makes no master key of
	// its own (the nodes must share one).
	if _, err := os.Stat(filepath.Join(tmp1, "master.key")); !os.IsNotExist(err) {
		t.Errorf("a node on PostgreSQL made a master key: %v", err)
	}
	readyz := func() (int, map[string]any) {
		resp := send(t, http.MethodGet, d1.url+"/readyz", "", nil)
		var doc map[string]any
		json.Unmarshal(resp.body, &doc)
		return resp.status, doc
	}
	if code, doc := readyz(); code != http.StatusOK || doc["store"] != "ok" || doc["blobs"] != "ok" {
		t.Errorf("/readyz with PostgreSQL up: %d %v", code, doc)
	}

	// PostgreSQL gone: a clear 503 with Retry-After, and the node lives;
	// /readyz says the store is what is missing.
	srv.Kill()
	if code, doc := readyz(); code != http.StatusServiceUnavailable || doc["store"] == "ok" || doc["store"] == nil ||
		doc["runsc"] != "ok" || doc["images"] != "ok" || doc["blobs"] != "ok" {
		t.Errorf("/readyz with PostgreSQL gone: %d %v; want 503 with store not ok, the rest ok", code, doc)
	}
	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/executions/" + e.ID, ""},
		{http.MethodPost, "/v1/execute", `{"language":"bash","code":"echo never"}`},
	} {
		resp := send(t, req.method, d1.url+req.path, key, strings.NewReader(req.body))
		var doc map[string]any
		json.Unmarshal(resp.body, &doc)
		typ, _ := doc["type"].(string)
		if resp.status != http.StatusServiceUnavailable || !strings.HasSuffix(typ, "store-unavailable") ||
			resp.header.Get("Retry-After") == "" || !strings.Contains(string(resp.body), "PostgreSQL") {
			t.Errorf("%s %s with PostgreSQL gone: %d %s Retry-After %q; want 503 store-unavailable naming PostgreSQL, with Retry-After",
				req.method, req.path, resp.status, resp.body, resp.header.Get("Retry-After"))
		}
	}
	if !d1.running() {
		t.Fatalf("airlockd exited when PostgreSQL went away\n%s", d1.logs())
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testreq.Eventually(t, 30*time.Second, "the node to read from PostgreSQL again", func() bool {
		got, err = c1.Execution(rctx, e.ID)
		return err == nil
	})
	if got.Stdout != "on-postgres\n" || got.Status != airlock.StatusCompleted {
		t.Errorf("after PostgreSQL came back: %+v", got)
	}
	if code, doc := readyz(); code != http.StatusOK || doc["store"] != "ok" {
		t.Errorf("/readyz after PostgreSQL came back: %d %v", code, doc)
	}
	d1.stop(t)

	// Another node on the same database reads the first one's run.
	n2, d2 := startNode(t, nodeOptions{name: "pg-two", bin: n1.bin}, flags...)
	tmp2 := n2.dir
	if _, err := os.Stat(filepath.Join(tmp2, "default.key")); !os.IsNotExist(err) {
		t.Errorf("the second node made tenant default again (its key file): %v", err)
	}
	c2 := newClient(t, d2.url, key)
	got, err = c2.Execution(rctx, e.ID)
	if err != nil || got.Stdout != "on-postgres\n" || len(got.Artifacts) != 1 {
		t.Fatalf("the first node's run read on the second: %+v, %v", got, err)
	}
	page, err := c2.ListExecutions(rctx, 0, "")
	if err != nil || len(page.Executions) != 1 || page.Executions[0].ID != e.ID {
		t.Fatalf("the second node's list: %+v, %v", page, err)
	}
	d2.stop(t)
}
