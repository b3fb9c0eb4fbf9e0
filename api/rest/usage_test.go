package rest_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/service/quota"
)

func TestUsage(t *testing.T) {
	ledger, err := quota.New(quota.Config{Defaults: quota.Limits{quota.Sessions: 3, quota.Memory: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *rest.Config) { c.Usage = ledger })
	h, err := ledger.Admit(e.tenantA.ID, quota.Claim{Kind: quota.Session, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	var u airlock.Usage
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/usage", key: e.keyA}), 200, &u)
	if u.TenantID != e.tenantA.ID || len(u.Quotas) != len(quota.Keys()) {
		t.Fatalf("usage %+v", u)
	}
	byName := map[string]airlock.QuotaUsage{}
	for _, q := range u.Quotas {
		byName[q.Quota] = q
	}
	if q := byName["sessions"]; q.Limit != 3 || q.Used != 1 || q.Remaining != 2 || q.Source != "default" || q.Window != "concurrent" {
		t.Errorf("sessions %+v", q)
	}
	if q := byName["memory"]; q.Used != 256<<20 || q.Remaining != 768<<20 || q.Unit != "bytes" {
		t.Errorf("memory %+v", q)
	}
	if q := byName["runs"]; q.Limit != -1 || q.Remaining != -1 {
		t.Errorf("runs without a limit %+v", q)
	}
	if q := byName["egress_bytes_per_day"]; q.ResetsAt == nil || q.Window != "day" {
		t.Errorf("daily %+v", q)
	}
	// Without a key: 401; without quotas: 501.
	if resp := e.do(req{method: "GET", path: "/v1/usage"}); resp.StatusCode != 401 {
		t.Errorf("without a key: %d", resp.StatusCode)
	}
	bare := newEnv(t)
	err = rest.DecodeProblem(bare.do(req{method: "GET", path: "/v1/usage", key: bare.keyA}))
	if ae, ok := err.(*airlock.Error); !ok || ae.Code != airlock.ENOTIMPLEMENTED || ae.Type != "usage-disabled" {
		t.Errorf("without quotas: %v", err)
	}
}

// The document lists exactly the quotas there are.
func TestOpenAPIQuotaNames(t *testing.T) {
	e := newEnv(t)
	_, body := fetchOpenAPI(t, e)
	var doc struct {
		Components struct {
			Schemas struct {
				QuotaUsage struct {
					Properties struct {
						Quota struct {
							Enum []string `json:"enum"`
						} `json:"quota"`
					} `json:"properties"`
				} `json:"QuotaUsage"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range quota.Keys() {
		want = append(want, string(k))
	}
	if got := doc.Components.Schemas.QuotaUsage.Properties.Quota.Enum; !slices.Equal(got, want) {
		t.Errorf("QuotaUsage.quota enum %v, want %v", got, want)
	}
}
