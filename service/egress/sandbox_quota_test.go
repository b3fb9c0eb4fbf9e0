package egress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/quota"
)

// A tenant's egress bytes of the day, in real sandboxes: once they are
// used up, the open connection of its session is cut, a new connection
// is refused, and a new sandbox with a network is refused with a 429
// egress-quota problem; a sandbox without a network still starts.
func TestSandboxTenantEgressQuota(t *testing.T) {
	const budget = 1 << 20
	ledger, err := quota.New(quota.Config{Defaults: quota.Limits{quota.EgressBytesPerDay: budget}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorldWith(t, ledger)
	a := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}})
	wantOK(t, "before", w.probe(t, a, "get", "http://api.test/plain"), "OK 200")

	done := make(chan string, 1)
	obs := &watcher{want: "OK open", seen: make(chan struct{})}
	go func() {
		e, err := w.mgr.Exec(context.Background(), w.tenant, a, airlock.SessionExecRequest{Cmd: []string{"python3", "/workspace/probe.py", "stream", "http://api.test/stream"}, TimeoutSec: 60}, obs)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- e.Stdout
	}()
	select {
	case <-obs.seen:
	case got := <-done:
		t.Fatalf("the stream did not open: %q", got)
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not open in 20 s")
	}
	from := w.ticks.Load()
	testreq.Eventually(t, 10*time.Second, "the stream to flow", func() bool { return w.ticks.Load() >= from+2 })
	// Another of the tenant's sandboxes uses the rest of the day's bytes.
	b := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}})
	started := time.Now()
	if got := w.probe(t, b, "get", "http://api.test/big"); strings.HasPrefix(got, "OK 200") && len(got) > 2<<20 {
		t.Errorf("the download passed the tenant's budget")
	}
	select {
	case got := <-done:
		if !strings.Contains(got, "OK open") || strings.Contains(got, "eof after 300") {
			t.Errorf("stream: %q", got)
		}
		t.Logf("the open stream was cut %s after the other sandbox's download began", time.Since(started).Round(time.Millisecond))
	case <-time.After(25 * time.Second):
		t.Fatal("the open stream was not cut")
	}
	wantErr(t, "a new connection", w.probe(t, a, "get", "http://api.test/plain"))
	if u := ledger.UsageOf(w.tenant.ID).Quotas[6]; u.Used < budget || u.Used > budget+64<<10 {
		t.Errorf("counted %+v, want about %d", u, budget)
	}
	evs := w.egressLog(t, a, "&kind=connection")
	cut := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Reason == egress.ReasonTenantQuota && e.Verdict == airlock.VerdictClosed
	})
	refused := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Reason == egress.ReasonTenantQuota && e.Verdict == airlock.VerdictDenied
	})
	if len(cut) != 1 || len(refused) == 0 {
		t.Errorf("want the cut and the refusal logged as %s: %s", egress.ReasonTenantQuota, dump(evs))
	}

	code, body := w.call(t, "POST", "/v1/sessions", `{"image": "base", "network": {"mode": "allow_list", "allow": ["api.test"]}}`)
	if code != 429 || !strings.Contains(body, `"quota":"egress_bytes_per_day"`) || !strings.Contains(body, "/problems/egress-quota") || !strings.Contains(body, `"resets_at"`) {
		t.Errorf("a session with a network: %d %s", code, body)
	}
	if code, body := w.call(t, "POST", "/v1/sessions", `{"image": "base"}`); code != 201 {
		t.Errorf("a session without a network: %d %s", code, body)
	}
}
