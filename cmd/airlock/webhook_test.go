package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/service/webhook"
	"github.com/airlockhq/airlock/store/sqlite"
)

// hooksServer is a real REST API with the event feed and webhooks on a
// SQLite store; it returns the URL, the store and keys of tenants a and
// b and a revoked key of a.
func hooksServer(t *testing.T) (url string, db *sqlite.DB, a *airlock.Tenant, keyA, keyB, revoked string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	blobs, err := disk.New(disk.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mk, _ := seal.GenerateMasterKey()
	keys, err := seal.NewKeys(db, mk)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhook.New(webhook.Config{Store: db, Keys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rest.New(rest.Config{Store: db, Blobs: blobs, Executor: noExecutor{}, SigningKey: make([]byte, 32),
		Events: db, Feed: db, Webhooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	key := func(tn *airlock.Tenant) (string, *airlock.APIKey) {
		secret, k := airlock.NewAPIKey(tn.ID, "", time.Now())
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return secret, k
	}
	a, b := &airlock.Tenant{Name: "a"}, &airlock.Tenant{Name: "b"}
	for _, tn := range []*airlock.Tenant{a, b} {
		if err := db.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	keyA, _ = key(a)
	keyB, _ = key(b)
	revoked, rk := key(a)
	if _, err := db.RevokeAPIKey(ctx, rk.ID); err != nil {
		t.Fatal(err)
	}
	return srv.URL, db, a, keyA, keyB, revoked
}

// airlock webhook create, ls, deliveries and rm, and airlock events
// reading the feed with a cursor and following it; another tenant's key
// sees none of it, a revoked key is refused.
func TestWebhookAndEventsCLI(t *testing.T) {
	cliEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	url, db, a, keyA, keyB, revoked := hooksServer(t)
	ctx := context.Background()
	as := func(key string) []string { return []string{"--url", url, "--key", key} }

	if _, errs, code := runCLI(t, runWebhook, "", append([]string{"create", "ftp://x"}, as(keyA)...)...); code != 2 {
		t.Errorf("create ftp://: %d %q", code, errs)
	}
	if _, errs, code := runCLI(t, runWebhook, "", append([]string{"create", "https://example.com/h", "--event", "session.exploded"}, as(keyA)...)...); code != 2 {
		t.Errorf("create with an unknown event: %d %q", code, errs)
	}
	out, errs, code := runCLI(t, runWebhook, "", append([]string{"create", "https://example.com/h", "--event", "session.created,session.ended"}, as(keyA)...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "whsec_") || !strings.Contains(errs, "not shown again") {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	id := lines[0]
	out, _, code = runCLI(t, runWebhook, "", append([]string{"ls"}, as(keyA)...)...)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "session.created,session.ended") || strings.Contains(out, "whsec_") {
		t.Fatalf("ls: %d %q", code, out)
	}
	out, _, code = runCLI(t, runWebhook, "", append([]string{"ls", "-o", "json"}, as(keyB)...)...)
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("b's ls: %d %q", code, out)
	}
	if _, errs, code := runCLI(t, runWebhook, "", append([]string{"ls"}, as(revoked)...)...); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("ls with a revoked key: %d %q", code, errs)
	}

	// Three events of a: the feed reads them oldest first.
	var ids []string
	for _, typ := range []string{airlock.EventSessionCreated, airlock.EventSessionPaused, airlock.EventSessionEnded} {
		ev := &airlock.Event{Type: typ, TenantID: a.ID, SessionID: "s1", Reason: "r-" + typ}
		if err := db.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	out, errs, code = runCLI(t, runClientEvents, "", append([]string{"--limit", "2"}, as(keyA)...)...)
	if code != 0 || strings.Index(out, "session.created") > strings.Index(out, "session.paused") ||
		strings.Index(out, "session.paused") > strings.Index(out, "session.ended") || !strings.Contains(errs, "--cursor "+ids[2]) {
		t.Fatalf("events: %d %q %q", code, out, errs)
	}
	out, _, code = runCLI(t, runClientEvents, "", append([]string{"--cursor", ids[0], "--json"}, as(keyA)...)...)
	var got []airlock.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev airlock.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		got = append(got, ev)
	}
	if code != 0 || len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[2] {
		t.Fatalf("events --cursor: %d %q", code, out)
	}
	out, _, code = runCLI(t, runClientEvents, "", append([]string{"--json"}, as(keyB)...)...)
	if code != 0 || out != "" {
		t.Errorf("b's events: %d %q", code, out)
	}
	if _, errs, code := runCLI(t, runClientEvents, "", append([]string{"--cursor", ids[0]}, as(keyB)...)...); code != 1 || !strings.Contains(errs, "unknown cursor") {
		t.Errorf("b with a's cursor: %d %q", code, errs)
	}
	if _, errs, code := runCLI(t, runClientEvents, "", as(revoked)...); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("events with a revoked key: %d %q", code, errs)
	}

	// --follow prints an event recorded while it waits.
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runClientEvents(fctx, append([]string{"--follow", "--json", "--cursor", ids[2]}, as(keyA)...), stdio{in: strings.NewReader(""), out: pw, err: io.Discard})
		pw.Close()
	}()
	later := &airlock.Event{Type: airlock.EventSessionResumed, TenantID: a.ID, SessionID: "s1"}
	if err := db.RecordEvent(ctx, later); err != nil {
		t.Fatal(err)
	}
	var ev airlock.Event
	if err := json.NewDecoder(pr).Decode(&ev); err != nil || ev.ID != later.ID {
		t.Fatalf("--follow: %+v %v", ev, err)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Errorf("--follow ended with %v", err)
	}

	// The delivery log, then rm; b cannot remove a's webhook.
	out, _, code = runCLI(t, runWebhook, "", append([]string{"deliveries", id}, as(keyA)...)...)
	if code != 0 || strings.Count(out, "pending") != 2 {
		t.Errorf("deliveries: %d %q", code, out)
	}
	if _, errs, code := runCLI(t, runWebhook, "", append([]string{"rm", id}, as(keyB)...)...); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("b's rm of a's webhook: %d %q", code, errs)
	}
	if _, errs, code := runCLI(t, runWebhook, "", append([]string{"rm", id}, as(revoked)...)...); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("rm with a revoked key: %d %q", code, errs)
	}
	if out, errs, code := runCLI(t, runWebhook, "", append([]string{"rm", id}, as(keyA)...)...); code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("rm: %d %q %q", code, out, errs)
	}
	if out, _, _ := runCLI(t, runWebhook, "", append([]string{"ls", "-o", "json"}, as(keyA)...)...); strings.TrimSpace(out) != "[]" {
		t.Errorf("ls after rm: %q", out)
	}
}
