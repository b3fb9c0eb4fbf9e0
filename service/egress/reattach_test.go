package egress_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/egress"
)

// A session's network outlives the service that made it: the service
// lets go of it (a clean stop that keeps sessions) without removing it,
// and a new service (a restart, with other ports) takes it back and
// serves it under the session's policy; what the old one closes leaves
// the network in place and still filtered.
func TestNetworkOutlivesItsService(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	api := f.inet.ServeHTTP(http.HandlerFunc(hello), "api.test")
	f.inet.SetName("api.test", api)
	f.inet.SetName("other.test", api)
	sb := f.attach([]string{"api.test"})
	if code, body, err := sb.get("https://api.test/before"); err != nil || code != 200 || !strings.Contains(body, "/before") {
		t.Fatalf("before: %d %q %v", code, body, err)
	}
	name := sb.att.(interface{ Name() string }).Name()
	sb.att.(interface{ Detach() }).Detach()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.svc.Close(ctx); err != nil {
		t.Fatalf("close the first service: %v", err)
	}
	if _, err := os.Stat(sb.ns()); err != nil {
		t.Fatalf("the network's namespace went with its service: %v", err)
	}
	// Between the two services nothing leaves the namespace.
	if c, err := sb.dial(api.String() + ":443"); err == nil {
		c.Close()
		t.Fatal("a connection left the namespace while no service ran")
	}

	svc2, err := egress.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc2.Close(cctx); err != nil {
			t.Errorf("close the second service: %v", err)
		}
	})
	req := airlock.NetworkRequest{TenantID: f.tenant.ID, SessionID: sb.id,
		Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}}}
	att2, err := svc2.ReattachNetwork(ctx, name, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	svc2.Start()
	if att2.Sandbox().NetNSPath != sb.ns() {
		t.Fatalf("reattached %s, want %s", att2.Sandbox().NetNSPath, sb.ns())
	}
	after := &sandbox{f: f, att: att2, id: sb.id}
	if code, body, err := after.get("https://api.test/after"); err != nil || code != 200 || !strings.Contains(body, "/after") {
		t.Fatalf("after the restart: %d %q %v", code, body, err)
	}
	if _, _, err := after.get("https://other.test/"); err == nil {
		t.Fatal("the reattached network reached a name off its list")
	}
	if _, err := svc2.ReattachNetwork(ctx, name, req); err == nil {
		t.Error("a network was taken back twice")
	}
	if _, err := svc2.ReattachNetwork(ctx, "nosuch", req); err == nil {
		t.Error("a network that does not exist was taken back")
	}
	svc2.Flush(ctx)
	evs, err := f.store.ListEgress(ctx, airlock.EgressFilter{TenantID: f.tenant.ID, SessionID: sb.id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied int
	for _, ev := range evs {
		switch {
		case ev.SNI == "api.test" && ev.Verdict == airlock.VerdictAllowed:
			allowed++
		case ev.Name == "other.test" && ev.Verdict == airlock.VerdictDenied:
			denied++
		}
	}
	// One allowed connection before and one after (the first may be
	// recorded as cut by the stop instead, if it was still open).
	if allowed < 1 || denied == 0 {
		t.Errorf("the audit log across the restart: %d allowed, %d denied: %s", allowed, denied, dump(evs))
	}
	if err := att2.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
