package egress_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/quota"
)

var _ egress.TenantMeter = (*quota.Ledger)(nil)

// Once a tenant's egress bytes of the day are used up, by any of its
// sandboxes, every open connection of its sandboxes is cut and new ones
// are refused.
func TestTenantQuota(t *testing.T) {
	const budget = 256 << 10
	ledger, err := quota.New(quota.Config{Defaults: quota.Limits{quota.EgressBytesPerDay: budget}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{quota: -1, tenants: ledger})
	big := strings.Repeat("x", 4<<20)
	api := f.inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // held open until the proxy cuts it
			return
		}
		io.WriteString(w, big)
	}), "api.test")
	f.inet.SetName("api.test", api)
	idle, heavy := f.attach([]string{"api.test"}), f.attach([]string{"api.test"})

	// One sandbox holds a connection open...
	c, err := idle.dial("api.test:80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: api.test\r\n\r\n")
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("the slow response: %q %v", line, err)
	}
	// ...while the other uses the day's budget up.
	if _, body, err := heavy.get("http://api.test/big"); err == nil && len(body) == len(big) {
		t.Fatal("the download passed the tenant's budget")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Fatal("the other sandbox's open connection was not cut")
	}
	for _, sb := range []*sandbox{idle, heavy} {
		if _, _, err := sb.get("http://api.test/big"); err == nil {
			t.Error("a new connection passed after the tenant's budget was used")
		}
	}
	if u := ledger.UsageOf(f.tenant.ID); u.Quotas[6].Quota != string(quota.EgressBytesPerDay) || u.Quotas[6].Used < budget || u.Quotas[6].Used > budget+4<<10 {
		t.Errorf("counted %+v, want about %d", u.Quotas[6], budget)
	}
	for _, sb := range []*sandbox{idle, heavy} {
		evs := find(sb.events(airlock.EgressConnection), func(e *airlock.EgressEvent) bool { return e.Reason == egress.ReasonTenantQuota })
		if len(evs) < 2 {
			t.Errorf("want the cut and the refusal of %s logged: %s", sb.id, dump(sb.events(airlock.EgressConnection)))
		}
	}
}
