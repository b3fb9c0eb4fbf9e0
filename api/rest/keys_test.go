package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// withAdmin serves the admin API and the audit log on the test's store,
// with the package quota's names.
func withAdmin() func(*rest.Config) {
	return func(c *rest.Config) {
		db := c.Store.(adminDB)
		c.Admin, c.Audit = db, db
		c.QuotaNames = []string{"sessions", "runs", "vcpu"}
	}
}

type adminDB interface {
	rest.AdminStore
	airlock.AuditStore
}

// adminKey adds an operator key to the store and returns its secret.
func (e *env) adminKey(name string) string {
	e.t.Helper()
	secret, k := airlock.NewAPIKey("", "", time.Now())
	k.Role, k.Name = airlock.RoleAdmin, name
	if err := e.store.CreateAPIKey(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

func jsonReq(method, path, key, body string) req {
	return req{method: method, path: path, key: key, body: body, header: map[string]string{"Content-Type": "application/json"}}
}

// A tenant lists, makes and revokes its own keys; a key made is shown
// once, works at once and keeps working beside the old one (rotation)
// until revoked; a revoked key is 401 on the next request; another
// tenant's key cannot be revoked or seen.
func TestTenantKeys(t *testing.T) {
	e := newEnv(t, withAdmin())
	var made struct {
		KeyID     string     `json:"key_id"`
		Key       string     `json:"key"`
		Name      string     `json:"name"`
		Role      string     `json:"role"`
		Prefix    string     `json:"prefix"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	exp := e.clock.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	decodeJSON(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"name":"ci","expires_at":"`+exp.Format(time.RFC3339)+`"}`)), 201, &made)
	if made.Key == "" || made.KeyID == "" || made.Name != "ci" || made.Role != "tenant" || !strings.HasPrefix(made.Key, made.Prefix) ||
		made.ExpiresAt == nil || !made.ExpiresAt.Equal(exp) {
		t.Fatalf("made %+v", made)
	}
	// Both keys work (rotation).
	for _, k := range []string{e.keyA, made.Key} {
		if r := e.do(req{method: "GET", path: "/v1/executions", key: k}); r.StatusCode != 200 {
			t.Fatalf("key works: %d", r.StatusCode)
		}
	}
	// The list never carries a secret or a hash.
	resp := e.do(req{method: "GET", path: "/v1/keys", key: made.Key})
	body := string(decodeJSON(t, resp, 200, &struct{}{}))
	if strings.Contains(body, made.Key) || strings.Contains(body, airlock.HashAPIKey(made.Key)) || strings.Contains(body, `"hash"`) {
		t.Errorf("the key list shows a secret: %s", body)
	}
	var list struct {
		Keys []airlock.APIKey `json:"keys"`
	}
	json.Unmarshal([]byte(body), &list)
	byID := map[string]airlock.APIKey{}
	for _, k := range list.Keys {
		byID[k.ID] = k
	}
	if len(list.Keys) != 2 || byID[made.KeyID].Name != "ci" || byID[made.KeyID].LastUsedAt == nil || byID[e.keyID(e.keyA)].LastUsedAt == nil {
		t.Errorf("list = %+v (want both of A's keys, used)", list.Keys)
	}
	// B sees none of A's keys and cannot revoke them.
	var listB struct {
		Keys []airlock.APIKey `json:"keys"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/keys", key: e.keyB}), 200, &listB)
	if len(listB.Keys) != 1 || listB.Keys[0].TenantID != e.tenantB.ID {
		t.Errorf("B's list = %+v", listB.Keys)
	}
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/keys/" + made.KeyID, key: e.keyB}), 404, "key-not-found")
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/keys/nope", key: e.keyA}), 404, "key-not-found")
	// An operator key is no tenant's: 404 on the tenant route.
	admin := e.adminKey("ops")
	var adminKeys struct {
		Keys []airlock.APIKey `json:"keys"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/keys", key: admin}), 200, &adminKeys)
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/keys/" + adminKeys.Keys[0].ID, key: e.keyA}), 404, "key-not-found")

	// Bad input.
	wantProblem(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"name":"x","expires_at":"2001-01-01T00:00:00Z"}`)), 400, "invalid-expiry")
	wantProblem(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"name":"`+strings.Repeat("n", 101)+`"}`)), 400, "invalid-key-name")
	wantProblem(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"name":"a\u0000b"}`)), 400, "invalid-key-name")
	wantAnyProblem(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"nme":"x"}`)), 400)

	// Revoke the old key with the new one: the old is 401 at once, the
	// new works.
	var revoked airlock.APIKey
	decodeJSON(t, e.do(req{method: "DELETE", path: "/v1/keys/" + e.keyID(e.keyA), key: made.Key}), 200, &revoked)
	if revoked.RevokedAt == nil {
		t.Errorf("revoked key without revoked_at: %+v", revoked)
	}
	p := wantProblem(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyA}), 401, "key-revoked")
	if p.Detail == "" {
		t.Error("key-revoked problem without detail")
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/keys", key: e.keyA}), 401, "key-revoked")
	wantProblem(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{}`)), 401, "key-revoked")
	if r := e.do(req{method: "GET", path: "/v1/keys", key: made.Key}); r.StatusCode != 200 {
		t.Errorf("the new key after revoking the old: %d", r.StatusCode)
	}
	// The key expires with the clock.
	e.clock.Advance(49 * time.Hour)
	wantProblem(t, e.do(req{method: "GET", path: "/v1/keys", key: made.Key}), 401, "key-expired")

	// The audit log has the actions, refusals too, with who did them.
	var audit struct {
		Entries []airlock.AuditEntry `json:"entries"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/audit", key: admin}), 200, &audit)
	var ok, refused int
	for _, a := range audit.Entries {
		if a.Action == "key.create" && a.Result == "ok" && a.KeyID == e.keyID(e.keyA) && a.Target == made.KeyID {
			ok++
		}
		if a.Action == "key.revoke" && a.Status == 404 && a.KeyID == e.keyID(e.keyB) && a.Result == "key-not-found" {
			refused++
		}
		if a.Action == "key.revoke" && a.Result == "ok" && a.KeyID == made.KeyID && a.Target == e.keyID(e.keyA) {
			ok++
		}
	}
	if ok != 2 || refused != 1 {
		t.Errorf("audit log (ok %d, refused %d): %+v", ok, refused, audit.Entries)
	}
}

// A signed artifact URL stops working when the key it was issued under
// is revoked, while the owner's other key still reads the artifact.
func TestArtifactURLOfRevokedKey(t *testing.T) {
	e := newEnv(t, withAdmin())
	e.exec.setFiles(testFile{name: "out.txt", contentType: "text/plain", data: "data"})
	// A second key of A, which the URL is issued under.
	var made struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	decodeJSON(t, e.do(jsonReq("POST", "/v1/keys", e.keyA, `{"name":"agent"}`)), 201, &made)
	m := e.execute(made.Key, `{"language":"python","code":"print(1)"}`)
	link := m["artifacts"].([]any)[0].(map[string]any)["url"].(string)
	u, _ := url.Parse(link)
	if u.Query().Get("key") != made.KeyID {
		t.Fatalf("link %s is not bound to key %s", link, made.KeyID)
	}
	if r := e.doURL(req{method: "GET"}, link); r.StatusCode != 200 {
		t.Fatalf("fresh link: %d", r.StatusCode)
	}
	decodeJSON(t, e.do(req{method: "DELETE", path: "/v1/keys/" + made.KeyID, key: e.keyA}), 200, &struct{}{})
	wantProblem(t, e.doURL(req{method: "GET"}, link), 401, "artifact-link-revoked")
	// The owner's live key still reads it (the link's query aside).
	if r := e.doURL(req{method: "GET", key: e.keyA}, e.srv.URL+u.Path); r.StatusCode != 200 {
		t.Errorf("owner's key: %d", r.StatusCode)
	}
}

// An operator key opens the admin API and nothing else; a tenant's key
// is 403 on every admin route (and recorded); unknown and revoked keys
// are 401 everywhere.
func TestAdminRoles(t *testing.T) {
	e := newEnv(t, withAdmin())
	admin := e.adminKey("ops")
	for _, rt := range rest.RouteTable() {
		if rt.Auth != "admin" {
			continue
		}
		path := strings.NewReplacer("{name}", "tenant-a", "{key_id}", "x").Replace(rt.Pattern)
		wantProblem(t, e.do(jsonReq(rt.Method, path, e.keyA, `{}`)), 403, rest.ProblemAdminRequired)
		wantProblem(t, e.do(jsonReq(rt.Method, path, "alk_unknown", `{}`)), 401, "unauthorized")
		wantProblem(t, e.do(jsonReq(rt.Method, path, "", `{}`)), 401, "unauthorized")
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions", key: admin}), 403, rest.ProblemTenantKeyRequired)
	wantProblem(t, e.do(jsonReq("POST", "/v1/sessions", admin, `{}`)), 403, rest.ProblemTenantKeyRequired)
	wantProblem(t, e.do(req{method: "GET", path: "/v1/keys", key: admin}), 403, rest.ProblemTenantKeyRequired)

	var denied struct {
		Entries []airlock.AuditEntry `json:"entries"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/audit?action=admin.denied", key: admin}), 200, &denied)
	if len(denied.Entries) == 0 || denied.Entries[0].KeyID != e.keyID(e.keyA) || denied.Entries[0].Status != 403 {
		t.Errorf("refusals in the audit log: %+v", denied.Entries)
	}

	// Revoking the operator key through the API: 401 from then on.
	var k airlock.APIKey
	decodeJSON(t, e.do(req{method: "DELETE", path: "/v1/admin/keys/" + e.keyID(admin), key: admin}), 200, &k)
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/tenants", key: admin}), 401, "key-revoked")
}

// The admin API makes, shows, changes and deletes tenants and their keys.
func TestAdminTenants(t *testing.T) {
	e := newEnv(t, withAdmin())
	admin := e.adminKey("ops")
	type tenantView struct {
		ID             string           `json:"id"`
		Name           string           `json:"name"`
		Isolation      string           `json:"isolation"`
		IsolationFloor string           `json:"isolation_floor"`
		Quotas         map[string]int64 `json:"quotas"`
		BrokerScopes   []string         `json:"broker_scopes"`
		Quarantined    bool             `json:"quarantined"`
	}
	var tv tenantView
	decodeJSON(t, e.do(jsonReq("POST", "/v1/admin/tenants", admin, `{"name":"acme"}`)), 201, &tv)
	if tv.Name != "acme" || tv.ID == "" || tv.Quarantined || len(tv.BrokerScopes) != 0 {
		t.Fatalf("created %+v", tv)
	}
	wantProblem(t, e.do(jsonReq("POST", "/v1/admin/tenants", admin, `{"name":"acme"}`)), 409, "tenant-exists")
	for _, bad := range []string{`{"name":""}`, `{"name":"Acme"}`, `{"name":"a b"}`, `{"name":"` + strings.Repeat("a", 65) + `"}`, `{"name":"../x"}`, `{}`, `[]`} {
		wantAnyProblem(t, e.do(jsonReq("POST", "/v1/admin/tenants", admin, bad)), 400)
	}
	var all struct {
		Tenants []tenantView `json:"tenants"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/tenants", key: admin}), 200, &all)
	if len(all.Tenants) != 3 || all.Tenants[2].Name != "acme" {
		t.Errorf("tenants = %+v", all.Tenants)
	}

	decodeJSON(t, e.do(jsonReq("PATCH", "/v1/admin/tenants/acme", admin,
		`{"isolation":"vm","quotas":{"sessions":3,"vcpu":-1},"broker_scopes":["tickets.read"],"quarantined":true,"quarantine_reason":"x"}`)), 200, &tv)
	if tv.Isolation != "vm" || tv.IsolationFloor != "vm" || tv.Quotas["sessions"] != 3 || tv.Quotas["vcpu"] != -1 ||
		len(tv.BrokerScopes) != 1 || tv.BrokerScopes[0] != "tickets.read" || !tv.Quarantined {
		t.Errorf("after PATCH: %+v", tv)
	}
	tv = tenantView{}
	decodeJSON(t, e.do(jsonReq("PATCH", "/v1/admin/tenants/acme", admin, `{"quotas":{"sessions":null},"quarantined":false,"isolation":""}`)), 200, &tv)
	if _, ok := tv.Quotas["sessions"]; ok || tv.Quarantined || tv.Isolation != "" || tv.Quotas["vcpu"] != -1 || len(tv.BrokerScopes) != 1 {
		t.Errorf("after the second PATCH: %+v", tv)
	}
	for _, bad := range []struct{ body, slug string }{
		{`{"isolation":"cloud"}`, "invalid-isolation"},
		{`{"quotas":{"nope":1}}`, "unknown-quota"},
		{`{"quotas":{"sessions":-2}}`, "invalid-quota"},
		{`{"broker_scopes":["bad scope"]}`, "invalid-broker-scope"},
		{`{"broker_scopes":[""]}`, "invalid-broker-scope"},
		{`{"quarantined":"yes"}`, ""},
	} {
		if bad.slug == "" {
			wantAnyProblem(t, e.do(jsonReq("PATCH", "/v1/admin/tenants/acme", admin, bad.body)), 400)
			continue
		}
		wantProblem(t, e.do(jsonReq("PATCH", "/v1/admin/tenants/acme", admin, bad.body)), 400, bad.slug)
	}
	wantProblem(t, e.do(jsonReq("PATCH", "/v1/admin/tenants/nope", admin, `{}`)), 404, "tenant-not-found")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/tenants/nope", key: admin}), 404, "tenant-not-found")

	// Keys of a tenant: made, listed, revoked by the operator.
	var made struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	decodeJSON(t, e.do(jsonReq("POST", "/v1/admin/tenants/acme/keys", admin, `{"name":"first"}`)), 201, &made)
	if r := e.do(req{method: "GET", path: "/v1/executions", key: made.Key}); r.StatusCode != 200 {
		t.Fatalf("acme's new key: %d", r.StatusCode)
	}
	var keys struct {
		Keys []airlock.APIKey `json:"keys"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/tenants/acme/keys", key: admin}), 200, &keys)
	if len(keys.Keys) != 1 || keys.Keys[0].ID != made.KeyID || keys.Keys[0].Name != "first" {
		t.Errorf("acme's keys = %+v", keys.Keys)
	}
	wantProblem(t, e.do(jsonReq("POST", "/v1/admin/tenants/nope/keys", admin, `{}`)), 404, "tenant-not-found")
	decodeJSON(t, e.do(req{method: "DELETE", path: "/v1/admin/keys/" + e.keyID(e.keyB), key: admin}), 200, &struct{}{})
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyB}), 401, "key-revoked")
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/admin/keys/nope", key: admin}), 404, "key-not-found")

	// Delete keeping the data: the tenant stays, quarantined, its keys
	// revoked.
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/admin/tenants/acme?keep_data=maybe", key: admin}), 400, "invalid-keep-data")
	if r := e.do(req{method: "DELETE", path: "/v1/admin/tenants/acme?keep_data=true", key: admin}); r.StatusCode != 204 {
		t.Fatalf("delete keeping data: %d", r.StatusCode)
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/tenants/acme", key: admin}), 200, &tv)
	if !tv.Quarantined {
		t.Error("a tenant deleted with keep_data is not quarantined")
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions", key: made.Key}), 401, "key-revoked")
	// Then for good: the tenant and its records are gone.
	e.exec.setFiles(testFile{name: "a.txt", data: "x"})
	e.execute(e.keyA, `{"language":"python","code":"print(1)"}`)
	if r := e.do(req{method: "DELETE", path: "/v1/admin/tenants/tenant-a", key: admin}); r.StatusCode != 204 {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/tenants/tenant-a", key: admin}), 404, "tenant-not-found")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyA}), 401, "unauthorized")
	wantProblem(t, e.do(req{method: "DELETE", path: "/v1/admin/tenants/tenant-a", key: admin}), 404, "tenant-not-found")

	var audit struct {
		Entries []airlock.AuditEntry `json:"entries"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/audit?limit=500", key: admin}), 200, &audit)
	seen := map[string]int{}
	for _, a := range audit.Entries {
		if a.KeyName != "ops" {
			t.Errorf("entry by %q: %+v", a.KeyName, a)
		}
		seen[a.Action+" "+a.Result]++
	}
	for _, want := range []string{"tenant.create ok", "tenant.create tenant-exists", "tenant.update ok", "tenant.update unknown-quota",
		"key.create ok", "key.revoke ok", "key.revoke key-not-found", "tenant.delete ok", "tenant.delete tenant-not-found"} {
		if seen[want] == 0 {
			t.Errorf("no audit entry %q in %v", want, seen)
		}
	}
	var page struct {
		Entries    []airlock.AuditEntry `json:"entries"`
		NextCursor string               `json:"next_cursor"`
	}
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/admin/audit?limit=2", key: admin}), 200, &page)
	if len(page.Entries) != 2 || page.NextCursor == "" {
		t.Errorf("a page of 2: %d entries, cursor %q", len(page.Entries), page.NextCursor)
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/audit?limit=0", key: admin}), 400, "invalid-limit")
}

// Without an admin store the admin API is 501, and still for operators only.
func TestAdminDisabled(t *testing.T) {
	e := newEnv(t)
	admin := e.adminKey("ops")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/tenants", key: admin}), 501, "admin-disabled")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/admin/tenants", key: e.keyA}), 403, rest.ProblemAdminRequired)
}

// wantAnyProblem checks the status and media type of a problem.
func wantAnyProblem(t *testing.T, resp *http.Response, status int) {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), rest.ProblemContentType) {
		t.Fatalf("%s %s: %d %s, want a %d problem", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, status)
	}
}
