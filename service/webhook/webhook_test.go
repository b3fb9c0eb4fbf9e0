package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/service/webhook"
	"github.com/airlockhq/airlock/store/sqlite"
)

type env struct {
	store *sqlite.DB
	keys  *seal.Keys
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mk, _ := seal.GenerateMasterKey()
	keys, err := seal.NewKeys(store, mk)
	if err != nil {
		t.Fatal(err)
	}
	return &env{store: store, keys: keys}
}

func (e *env) tenant(t *testing.T, name string) *airlock.Tenant {
	t.Helper()
	tn := &airlock.Tenant{Name: name}
	if err := e.store.CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

func (e *env) service(t *testing.T, mod func(*webhook.Config)) *webhook.Service {
	t.Helper()
	cfg := webhook.Config{
		Store: e.store, Keys: e.keys, AllowPrivate: true,
		Schedule: []time.Duration{20 * time.Millisecond}, Interval: 20 * time.Millisecond,
		Timeout: 2 * time.Second, Lease: 5 * time.Second, MaxPerTenant: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Close() })
	return s
}

// receiver is a loopback webhook receiver that checks every signature
// with its secret and can be told to fail its first n requests.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	secret   []byte
	failures int // fail this many requests first (500)
	tries    int
	got      []map[string]any
	bad      []string
	arrived  chan struct{}
}

func newReceiver(t *testing.T, failures int) *receiver {
	r := &receiver{failures: failures, arrived: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tries++
		if err := webhook.Verify(req.Header.Get(webhook.SignatureHeader), r.secret, body, time.Now(), time.Minute); err != nil {
			r.bad = append(r.bad, req.Header.Get(webhook.SignatureHeader))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.tries <= r.failures {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var m map[string]any
		json.Unmarshal(body, &m)
		r.got = append(r.got, m)
		w.WriteHeader(http.StatusNoContent)
		r.arrived <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) wait(t *testing.T, n int) []map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		got, bad := append([]map[string]any{}, r.got...), len(r.bad)
		r.mu.Unlock()
		if bad > 0 {
			t.Fatalf("%d deliveries with a bad signature", bad)
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-r.arrived:
		case <-deadline:
			t.Fatalf("%d of %d deliveries arrived", len(got), n)
		}
	}
}

func register(t *testing.T, s *webhook.Service, tn *airlock.Tenant, r *receiver, events ...string) *airlock.Webhook {
	t.Helper()
	w, err := s.CreateWebhook(context.Background(), tn, airlock.CreateWebhookRequest{URL: r.URL + "/hook", Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.Secret, "whsec_") {
		t.Fatalf("secret %q", w.Secret)
	}
	r.mu.Lock()
	r.secret = []byte(w.Secret)
	r.mu.Unlock()
	return w
}

func record(t *testing.T, e *env, tn *airlock.Tenant, typ, session string) *airlock.Event {
	t.Helper()
	ev := &airlock.Event{Type: typ, TenantID: tn.ID, SessionID: session}
	if err := e.store.RecordEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestDeliveredInOrderSigned(t *testing.T) {
	e := newEnv(t)
	a, b := e.tenant(t, "a"), e.tenant(t, "b")
	s := e.service(t, func(c *webhook.Config) { c.Workers = 1 })
	ra, rb := newReceiver(t, 0), newReceiver(t, 0)
	register(t, s, a, ra)
	register(t, s, b, rb)
	types := []string{airlock.EventSessionCreated, airlock.EventSessionPaused, airlock.EventSessionResumed, airlock.EventSessionEnded}
	var ids []string
	for _, typ := range types {
		ids = append(ids, record(t, e, a, typ, "s1").ID)
	}
	record(t, e, b, airlock.EventSessionCreated, "sb")
	got := ra.wait(t, 4)
	for i, m := range got {
		if m["type"] != types[i] || m["id"] != ids[i] || m["session_id"] != "s1" || m["tenant_id"] != a.ID {
			t.Errorf("delivery %d: %v, want %s %s", i, m, types[i], ids[i])
		}
	}
	// b's receiver gets b's event only, a's only a's.
	gb := rb.wait(t, 1)
	if len(gb) != 1 || gb[0]["session_id"] != "sb" {
		t.Errorf("b got %v", gb)
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if len(ra.got) != 4 {
		t.Errorf("a got %d deliveries, want 4", len(ra.got))
	}
}

func TestRetriedUntilSixthTry(t *testing.T) {
	e := newEnv(t)
	a := e.tenant(t, "a")
	s := e.service(t, nil)
	r := newReceiver(t, 5)
	w := register(t, s, a, r)
	ev := record(t, e, a, airlock.EventSessionEnded, "s1")
	got := r.wait(t, 1)
	if got[0]["id"] != ev.ID {
		t.Fatalf("got %v", got[0])
	}
	r.mu.Lock()
	tries := r.tries
	r.mu.Unlock()
	if tries != 6 {
		t.Errorf("%d tries, want 6", tries)
	}
	page := waitDelivery(t, s, a, w.ID, func(d *airlock.WebhookDelivery) bool { return d.State == airlock.DeliveryDelivered })
	if d := page.Deliveries[0]; d.Attempts != 6 || d.LastStatus != 204 || d.EventID != ev.ID || d.DeliveredAt == nil {
		t.Errorf("delivery log: %+v", d)
	}

	// Replay sends it again, signed anew.
	if _, err := s.ReplayDelivery(context.Background(), a, w.ID, page.Deliveries[0].ID); err != nil {
		t.Fatal(err)
	}
	if again := r.wait(t, 2); again[1]["id"] != ev.ID {
		t.Errorf("replayed %v", again[1])
	}
	waitDelivery(t, s, a, w.ID, func(d *airlock.WebhookDelivery) bool { return d.State == airlock.DeliveryDelivered && d.Attempts == 7 })
}

func waitDelivery(t *testing.T, s *webhook.Service, tn *airlock.Tenant, id string, ok func(*airlock.WebhookDelivery) bool) *airlock.WebhookDeliveryPage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := s.ListDeliveries(context.Background(), tn, id, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Deliveries) > 0 && ok(page.Deliveries[0]) {
			return page
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log never got there: %+v", page.Deliveries)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for time
	}
}

func TestGivenUpAfterHorizon(t *testing.T) {
	e := newEnv(t)
	a := e.tenant(t, "a")
	s := e.service(t, func(c *webhook.Config) { c.Horizon = time.Second })
	r := newReceiver(t, 1000)
	w := register(t, s, a, r)
	record(t, e, a, airlock.EventSessionEnded, "s1")
	page := waitDelivery(t, s, a, w.ID, func(d *airlock.WebhookDelivery) bool { return d.State == airlock.DeliveryFailed })
	if d := page.Deliveries[0]; d.Attempts < 2 || d.LastStatus != 500 || !strings.Contains(d.LastError, "given up") {
		t.Errorf("failed delivery: %+v", d)
	}
}

// fixedResolver answers every name with its addresses.
type fixedResolver []netip.Addr

func (f fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

func TestPrivateAddressRefused(t *testing.T) {
	e := newEnv(t)
	a := e.tenant(t, "a")
	r := newReceiver(t, 0)
	// Without --webhook-allow-private: the loopback receiver, by address
	// and by a name resolving to it, is refused, and never reached.
	s := e.service(t, func(c *webhook.Config) {
		c.AllowPrivate = false
		c.Resolver = fixedResolver{netip.MustParseAddr("127.0.0.1")}
	})
	byAddr := register(t, s, a, r)
	port := r.URL[strings.LastIndex(r.URL, ":")+1:]
	byName, err := s.CreateWebhook(context.Background(), a, airlock.CreateWebhookRequest{URL: "http://hooks.example.test:" + port + "/x"})
	if err != nil {
		t.Fatal(err)
	}
	record(t, e, a, airlock.EventSessionCreated, "s1")
	for _, w := range []*airlock.Webhook{byAddr, byName} {
		page := waitDelivery(t, s, a, w.ID, func(d *airlock.WebhookDelivery) bool { return d.State == airlock.DeliveryFailed })
		if d := page.Deliveries[0]; !strings.Contains(d.LastError, "refused") || d.Attempts != 1 {
			t.Errorf("%s: %+v", w.URL, d)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tries != 0 {
		t.Errorf("the receiver was reached %d times", r.tries)
	}
}

func TestMetadataRefusedEvenWithAllowPrivate(t *testing.T) {
	e := newEnv(t)
	a := e.tenant(t, "a")
	s := e.service(t, func(c *webhook.Config) {
		c.Resolver = fixedResolver{netip.MustParseAddr("169.254.169.254")}
	})
	w, err := s.CreateWebhook(context.Background(), a, airlock.CreateWebhookRequest{URL: "http://metadata.example.test/latest"})
	if err != nil {
		t.Fatal(err)
	}
	record(t, e, a, airlock.EventSessionCreated, "s1")
	page := waitDelivery(t, s, a, w.ID, func(d *airlock.WebhookDelivery) bool { return d.State == airlock.DeliveryFailed })
	if !strings.Contains(page.Deliveries[0].LastError, "metadata") {
		t.Errorf("%+v", page.Deliveries[0])
	}
}

func TestRegistration(t *testing.T) {
	e := newEnv(t)
	a, b := e.tenant(t, "a"), e.tenant(t, "b")
	s := e.service(t, nil)
	ctx := context.Background()
	for _, req := range []airlock.CreateWebhookRequest{
		{URL: ""}, {URL: "ftp://x/y"}, {URL: "/relative"}, {URL: "http://user:pw@x/"}, {URL: "http://x/#frag"},
		{URL: "http://x/", Events: []string{"session.exploded"}}, {URL: "http://" + strings.Repeat("a", 3000)},
	} {
		_, err := s.CreateWebhook(ctx, a, req)
		if airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("%+v: %v, want invalid", req, err)
		}
	}
	var ids []string
	for range 3 {
		w, err := s.CreateWebhook(ctx, a, airlock.CreateWebhookRequest{URL: "https://example.com/h", Events: []string{airlock.EventSessionEnded, airlock.EventSessionEnded}})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Events) != 1 {
			t.Errorf("events not deduplicated: %v", w.Events)
		}
		ids = append(ids, w.ID)
	}
	if _, err := s.CreateWebhook(ctx, a, airlock.CreateWebhookRequest{URL: "https://example.com/h"}); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Errorf("fourth webhook: %v, want the per-tenant limit", err)
	}
	page, err := s.ListWebhooks(ctx, a)
	if err != nil || len(page.Webhooks) != 3 {
		t.Fatalf("list: %+v %v", page, err)
	}
	for _, w := range page.Webhooks {
		if w.Secret != "" {
			t.Errorf("listed with its secret: %+v", w)
		}
		raw, _ := json.Marshal(w)
		if strings.Contains(string(raw), "sealed") || strings.Contains(string(raw), "key_id") {
			t.Errorf("sealed secret shown: %s", raw)
		}
	}
	if err := s.DeleteWebhook(ctx, b, ids[0]); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b deletes a's: %v", err)
	}
	if _, err := s.ListDeliveries(ctx, b, ids[0], "", 10); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("b lists a's deliveries: %v", err)
	}
	if err := s.DeleteWebhook(ctx, a, ids[0]); err != nil {
		t.Fatal(err)
	}
}

func TestSignVerify(t *testing.T) {
	secret, body := []byte("whsec_x"), []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0)
	h := webhook.Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=1700000000,v1=") || len(h) != len("t=1700000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := webhook.Verify(h, secret, body, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		h    string
		body []byte
		now  time.Time
	}{
		"other body":   {h, []byte(`{"a":2}`), now},
		"stale":        {h, body, now.Add(10 * time.Minute)},
		"other secret": {webhook.Sign([]byte("x"), now, body), body, now},
		"no v1":        {"t=1700000000", body, now},
		"garbage":      {"nonsense", body, now},
	} {
		if err := webhook.Verify(tc.h, secret, tc.body, tc.now, time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}
