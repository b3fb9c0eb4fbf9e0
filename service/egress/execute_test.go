package egress_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
)

// POST /v1/execute with allow_network: the tenant's default allow list,
// a sandbox booted in a network of its own (never from the pool), and
// had_network_attempt on the record.
func TestExecuteWithNetwork(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	api := f.inet.ServeHTTP(http.HandlerFunc(hello), "api.test")
	f.inet.SetName("api.test", api)
	ctx := context.Background()
	ctr := hostMetadataCounter(t)
	lists := map[string][]string{f.tenant.Name: {"api.test"}}
	st := teststack.New(t, teststack.Options{
		Store: f.store, Egress: f.svc, EgressLog: f.store, NoServer: true,
		NetworkAllow: func(tn *airlock.Tenant) []string { return lists[tn.Name] },
	})
	m := st.Manager
	code := `
import socket, ssl, urllib.request
open("/tmp/ca.pem", "w").write(CA)
ctx = ssl.create_default_context(cafile="/tmp/ca.pem")
print(urllib.request.urlopen("https://api.test/one-shot", context=ctx, timeout=8).read().decode())
for host, port in (("169.254.169.254", 80), ("other.test", 443)):
    try:
        socket.create_connection((host, port), timeout=3).recv(10)
        print("reached", host)
    except Exception as e:
        print("refused", host, type(e).__name__)
`
	code = "CA = '''" + string(f.inet.CAPEM) + "'''\n" + code
	e, err := m.Execute(ctx, f.tenant, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base", Code: code, AllowNetwork: true, TimeoutSec: 30})
	if err != nil {
		t.Fatal(err)
	}
	if e.ExitCode != 0 || !strings.Contains(e.Stdout, "hello from api.test/one-shot") || strings.Contains(e.Stdout, "reached") || !e.HadNetworkAttempt || e.StartSource != airlock.StartCold {
		t.Errorf("networked run: exit %d, stdout %q, stderr %q, had_network_attempt %v, start %s", e.ExitCode, e.Stdout, e.Stderr, e.HadNetworkAttempt, e.StartSource)
	}
	// The sandbox is destroyed after the response; its network with it.
	if !testreq.Poll(20*time.Second, func() bool { return f.svc.Networks().Held() == 0 }) {
		t.Errorf("the execution's network outlived it by 20 s (%d held)", f.svc.Networks().Held())
	}
	f.svc.Flush(ctx)
	evs, err := f.store.ListEgress(ctx, airlock.EgressFilter{TenantID: f.tenant.ID, ExecutionID: e.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(find(evs, func(ev *airlock.EgressEvent) bool {
		return ev.SNI == "api.test" && ev.Verdict == airlock.VerdictAllowed
	})) != 1 ||
		len(find(evs, func(ev *airlock.EgressEvent) bool {
			return ev.Kind == airlock.EgressDrops && slices.Contains(ev.Flags, "metadata")
		})) == 0 ||
		len(find(evs, func(ev *airlock.EgressEvent) bool {
			return ev.Name == "other.test" && ev.Verdict == airlock.VerdictDenied
		})) == 0 {
		t.Errorf("the execution's egress log: %s", dump(evs))
	}

	// Without allow_network: no network, nothing leaves, nothing tried
	// that the host could see.
	e, err = m.Execute(ctx, f.tenant, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base", TimeoutSec: 30,
		Code: "import socket\ntry:\n    socket.create_connection(('169.254.169.254', 80), timeout=3)\nexcept Exception as e:\n    print(type(e).__name__, e)"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Stdout, "unreachable") || e.HadNetworkAttempt {
		t.Errorf("run without a network: %q, had_network_attempt %v", e.Stdout, e.HadNetworkAttempt)
	}
	if n := ctr(); n != 0 {
		t.Errorf("%d packets to 169.254.169.254 on the host", n)
	}

	// A tenant without a default allow list is refused.
	delete(lists, f.tenant.Name)
	_, err = m.Execute(ctx, f.tenant, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base", Code: "print(1)", AllowNetwork: true})
	var ae *airlock.Error
	if !errorsAs(err, &ae) || ae.Type != "network-unavailable" || !strings.Contains(ae.Message, "no default allow list") {
		t.Errorf("a tenant without a list: %v", err)
	}
}
