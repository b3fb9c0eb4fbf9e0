package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/airlockhq/airlock"
)

// AdminStore is what the admin API needs of the store beyond Store: the
// audit log, broker grants, quota overrides, quarantines and deletion.
type AdminStore interface {
	airlock.BrokerGrantStore
	airlock.TenantDeleter
	TenantQuotas(ctx context.Context) (map[string]map[string]int64, error)
	SetTenantQuota(ctx context.Context, tenantID, quota string, limit int64) error
	DeleteTenantQuota(ctx context.Context, tenantID, quota string) error
	QuarantineTenant(ctx context.Context, q *airlock.Quarantine) error
	UnquarantineTenant(ctx context.Context, tenantID string) (bool, error)
	TenantQuarantine(ctx context.Context, tenantID string) (*airlock.Quarantine, error)
}

// adminTenant is a tenant as the admin API shows it.
type adminTenant struct {
	*airlock.Tenant
	IsolationFloor airlock.Isolation   `json:"isolation_floor"`
	Quotas         map[string]int64    `json:"quotas"`
	BrokerScopes   []string            `json:"broker_scopes"`
	Quarantined    bool                `json:"quarantined"`
	Quarantine     *airlock.Quarantine `json:"quarantine,omitempty"`
}

func (s *Server) adminDisabled(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Admin == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "admin-disabled", "this server has no admin API"))
		return true
	}
	return false
}

func (s *Server) tenantView(ctx context.Context, t *airlock.Tenant, overrides map[string]map[string]int64) (*adminTenant, error) {
	v := &adminTenant{Tenant: t, IsolationFloor: t.IsolationFloor(), Quotas: map[string]int64{}}
	if overrides == nil {
		all, err := s.cfg.Admin.TenantQuotas(ctx)
		if err != nil {
			return nil, err
		}
		overrides = all
	}
	for k, n := range overrides[t.ID] {
		v.Quotas[k] = n
	}
	grants, err := s.cfg.Admin.BrokerGrants(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	v.BrokerScopes = grants
	q, err := s.cfg.Admin.TenantQuarantine(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	v.Quarantined, v.Quarantine = q != nil, q
	return v, nil
}

// tenantByName finds the tenant named in the path.
func (s *Server) tenantByName(r *http.Request) (*airlock.Tenant, error) {
	name := r.PathValue("name")
	t, err := s.cfg.Store.TenantByName(r.Context(), name)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, airlock.Problem(airlock.ENOTFOUND, "tenant-not-found", "tenant %q not found", clipText(name, 100))
	}
	return t, err
}

// adminCreateTenant answers POST /v1/admin/tenants {"name": ...}.
func (s *Server) adminCreateTenant(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.audited(w, r, "tenant.create", "", "", err)
		return
	}
	if err := airlock.ValidateTenantName(req.Name); err != nil {
		s.audited(w, r, "tenant.create", clipText(req.Name, 100), "", err)
		return
	}
	t := &airlock.Tenant{Name: req.Name}
	err := s.cfg.Store.CreateTenant(r.Context(), t)
	if airlock.ErrorCode(err) == airlock.ECONFLICT {
		err = errorf(airlock.ECONFLICT, "tenant-exists", "tenant %q exists", req.Name)
	}
	var v *adminTenant
	if err == nil {
		v, err = s.tenantView(r.Context(), t, nil)
	}
	if err != nil {
		s.audited(w, r, "tenant.create", req.Name, "", err)
		return
	}
	s.auditOK(r, "tenant.create", t.Name, http.StatusCreated, "id="+t.ID)
	s.writeJSON(w, r, http.StatusCreated, v)
}

// adminListTenants answers GET /v1/admin/tenants.
func (s *Server) adminListTenants(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	ts, err := s.cfg.Store.ListTenants(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	overrides, err := s.cfg.Admin.TenantQuotas(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	out := struct {
		Tenants []*adminTenant `json:"tenants"`
	}{Tenants: []*adminTenant{}}
	for _, t := range ts {
		v, err := s.tenantView(r.Context(), t, overrides)
		if err != nil {
			s.error(w, r, err)
			return
		}
		out.Tenants = append(out.Tenants, v)
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// adminGetTenant answers GET /v1/admin/tenants/{name}.
func (s *Server) adminGetTenant(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	t, err := s.tenantByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	v, err := s.tenantView(r.Context(), t, nil)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}

// patchTenantRequest is the body of PATCH /v1/admin/tenants/{name}: each
// member present is set, each absent left alone.
type patchTenantRequest struct {
	// Isolation is the tenant's floor: container, kernel, vm, or "" for
	// none.
	Isolation *airlock.Isolation `json:"isolation"`
	// Quotas sets overrides by quota name: a limit in the quota's unit,
	// -1 for none, null to drop the override (the default applies).
	Quotas map[string]*int64 `json:"quotas"`
	// BrokerScopes replaces the tenant's broker grants.
	BrokerScopes *[]string `json:"broker_scopes"`
	// Quarantined quarantines (with QuarantineReason) or lifts it.
	Quarantined      *bool  `json:"quarantined"`
	QuarantineReason string `json:"quarantine_reason"`
}

// maxBrokerGrants bounds a tenant's broker grants.
const maxBrokerGrants = 64

func (s *Server) validatePatch(req *patchTenantRequest) error {
	if req.Isolation != nil && *req.Isolation != "" && !req.Isolation.Valid() {
		return errorf(airlock.EINVALID, "invalid-isolation", "isolation must be container, kernel, vm or \"\"")
	}
	for name, v := range req.Quotas {
		if !slices.Contains(s.cfg.QuotaNames, name) {
			return errorf(airlock.EINVALID, "unknown-quota", "unknown quota %q (known: %s)", clipText(name, 64), strings.Join(s.cfg.QuotaNames, ", "))
		}
		if v != nil && *v < -1 {
			return errorf(airlock.EINVALID, "invalid-quota", "quota %s: a limit is a whole number, or -1 for none", name)
		}
	}
	if req.BrokerScopes != nil {
		if len(*req.BrokerScopes) > maxBrokerGrants {
			return errorf(airlock.EINVALID, "invalid-broker-scope", "at most %d broker scopes", maxBrokerGrants)
		}
		for _, sc := range *req.BrokerScopes {
			if !airlock.ValidScopeName(sc) {
				return errorf(airlock.EINVALID, "invalid-broker-scope", "broker scope %q is not a valid scope name", clipText(sc, 100))
			}
		}
	}
	if len(req.QuarantineReason) > 500 {
		return errorf(airlock.EINVALID, "invalid-quarantine-reason", "quarantine_reason is longer than 500 bytes")
	}
	return nil
}

// adminPatchTenant answers PATCH /v1/admin/tenants/{name}.
func (s *Server) adminPatchTenant(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	name := r.PathValue("name")
	var req patchTenantRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.audited(w, r, "tenant.update", name, "", err)
		return
	}
	detail := patchDetail(&req)
	t, err := s.tenantByName(r)
	if err == nil {
		err = s.validatePatch(&req)
	}
	if err == nil {
		err = s.applyPatch(r.Context(), t, &req)
	}
	var v *adminTenant
	if err == nil {
		if t, err = s.cfg.Store.TenantByID(r.Context(), t.ID); err == nil {
			v, err = s.tenantView(r.Context(), t, nil)
		}
	}
	if err != nil {
		s.audited(w, r, "tenant.update", name, detail, err)
		return
	}
	s.auditOK(r, "tenant.update", name, http.StatusOK, detail)
	s.writeJSON(w, r, http.StatusOK, v)
}

func (s *Server) applyPatch(ctx context.Context, t *airlock.Tenant, req *patchTenantRequest) error {
	if req.Isolation != nil {
		if err := s.cfg.Store.SetTenantIsolation(ctx, t.ID, *req.Isolation); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(req.Quotas))
	for k := range req.Quotas {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		var err error
		if v := req.Quotas[k]; v == nil {
			err = s.cfg.Admin.DeleteTenantQuota(ctx, t.ID, k)
		} else {
			err = s.cfg.Admin.SetTenantQuota(ctx, t.ID, k, *v)
		}
		if err != nil {
			return err
		}
	}
	if req.BrokerScopes != nil {
		if err := s.cfg.Admin.SetBrokerGrants(ctx, t.ID, *req.BrokerScopes); err != nil {
			return err
		}
	}
	if req.Quarantined != nil {
		if *req.Quarantined {
			reason := req.QuarantineReason
			if reason == "" {
				reason = "quarantined by the operator"
			}
			return s.cfg.Admin.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: t.ID, Reason: reason, Since: s.cfg.Now().UTC()})
		}
		_, err := s.cfg.Admin.UnquarantineTenant(ctx, t.ID)
		return err
	}
	return nil
}

// patchDetail says what a PATCH asked for, for the audit log.
func patchDetail(req *patchTenantRequest) string {
	var parts []string
	if req.Isolation != nil {
		parts = append(parts, "isolation="+quoteDetail(string(*req.Isolation)))
	}
	if len(req.Quotas) > 0 {
		b, _ := json.Marshal(req.Quotas)
		parts = append(parts, "quotas="+string(b))
	}
	if req.BrokerScopes != nil {
		b, _ := json.Marshal(*req.BrokerScopes)
		parts = append(parts, "broker_scopes="+string(b))
	}
	if req.Quarantined != nil {
		parts = append(parts, fmt.Sprintf("quarantined=%v", *req.Quarantined))
	}
	return strings.Join(parts, " ")
}

// adminDeleteTenant answers DELETE /v1/admin/tenants/{name}[?keep_data=true]:
// the tenant's live sessions are ended and its keys revoked; then, unless
// keep_data is true, the tenant and every record of it (executions,
// artifacts and their bytes, sessions, events, quotas, grants) are
// removed. With keep_data the tenant stays, quarantined, with its records.
func (s *Server) adminDeleteTenant(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	name := r.PathValue("name")
	keep := false
	switch v := r.URL.Query().Get("keep_data"); v {
	case "", "false":
	case "true":
		keep = true
	default:
		s.audited(w, r, "tenant.delete", name, "", errorf(airlock.EINVALID, "invalid-keep-data", "keep_data must be true or false"))
		return
	}
	detail := fmt.Sprintf("keep_data=%v", keep)
	t, err := s.tenantByName(r)
	if err == nil {
		err = s.retireTenant(r.Context(), t, keep)
	}
	if err != nil {
		s.audited(w, r, "tenant.delete", name, detail, err)
		return
	}
	s.auditOK(r, "tenant.delete", name, http.StatusNoContent, detail)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) retireTenant(ctx context.Context, t *airlock.Tenant, keep bool) error {
	// First no new work: quarantine and revoke every key.
	if err := s.cfg.Admin.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: t.ID, Reason: "tenant deleted by the operator", Since: s.cfg.Now().UTC()}); err != nil {
		return err
	}
	keys, err := s.cfg.Store.ListAPIKeys(ctx, airlock.KeyFilter{TenantID: t.ID})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := s.cfg.Store.RevokeAPIKey(ctx, k.ID); err != nil {
			return err
		}
	}
	if s.cfg.Sessions != nil {
		for {
			page, err := s.cfg.Sessions.ListSessions(ctx, t, airlock.SessionFilter{TenantID: t.ID, LiveOnly: true, Limit: MaxPageLimit})
			if err != nil {
				return err
			}
			ended := 0
			for _, sess := range page.Sessions {
				if _, err := s.cfg.Sessions.DeleteSession(ctx, t, sess.ID); err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
					return err
				}
				ended++
			}
			if ended == 0 || page.NextCursor == "" {
				break
			}
		}
	}
	if keep {
		return nil
	}
	// The artifacts' bytes, then the records.
	before := ""
	for {
		es, err := s.cfg.Store.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: t.ID, Limit: MaxPageLimit, Before: before})
		if err != nil {
			return err
		}
		for _, e := range es {
			for i := range e.Artifacts {
				a := &e.Artifacts[i]
				if err := s.cfg.Blobs.Delete(ctx, ArtifactBlobKey(a)); err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
					s.log.LogAttrs(ctx, slog.LevelWarn, "delete tenant: artifact blob", slog.String("artifact", a.ID), slog.String("error", err.Error()))
				}
			}
		}
		if len(es) < MaxPageLimit {
			break
		}
		before = es[len(es)-1].ID
	}
	return s.cfg.Admin.DeleteTenant(ctx, t.ID)
}

// adminCreateKey answers POST /v1/admin/tenants/{name}/keys: a new key of
// the tenant; the secret is in this answer only.
func (s *Server) adminCreateKey(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	name := r.PathValue("name")
	var req createKeyRequest
	err := decodeJSON(w, r, &req)
	var t *airlock.Tenant
	if err == nil {
		t, err = s.tenantByName(r)
	}
	var k *createdKey
	if err == nil {
		k, err = s.makeKey(r, t.ID, airlock.RoleTenant, req)
	}
	if err != nil {
		s.audited(w, r, "key.create", name, "", err)
		return
	}
	s.auditOK(r, "key.create", name, http.StatusCreated, "key_id="+k.ID+" name="+quoteDetail(k.Name))
	s.writeJSON(w, r, http.StatusCreated, k)
}

// adminListKeys answers GET /v1/admin/tenants/{name}/keys.
func (s *Server) adminListKeys(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	t, err := s.tenantByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	keys, err := s.cfg.Store.ListAPIKeys(r.Context(), airlock.KeyFilter{TenantID: t.ID})
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, keyList{Keys: keys})
}

// adminCreateOperatorKey answers POST /v1/admin/keys: a new operator key.
func (s *Server) adminCreateOperatorKey(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	var req createKeyRequest
	err := decodeJSON(w, r, &req)
	var k *createdKey
	if err == nil {
		k, err = s.makeKey(r, "", airlock.RoleAdmin, req)
	}
	if err != nil {
		s.audited(w, r, "admin-key.create", "", "", err)
		return
	}
	s.auditOK(r, "admin-key.create", k.ID, http.StatusCreated, "name="+quoteDetail(k.Name))
	s.writeJSON(w, r, http.StatusCreated, k)
}

// adminListOperatorKeys answers GET /v1/admin/keys: the operator's keys.
func (s *Server) adminListOperatorKeys(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	keys, err := s.cfg.Store.ListAPIKeys(r.Context(), airlock.KeyFilter{Role: airlock.RoleAdmin})
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, keyList{Keys: keys})
}

// adminRevokeKey answers DELETE /v1/admin/keys/{key_id}: revokes any key,
// a tenant's or an operator's.
func (s *Server) adminRevokeKey(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	id := r.PathValue("key_id")
	k, err := s.cfg.Store.RevokeAPIKey(r.Context(), id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		err = keyNotFound(id)
	}
	if err != nil {
		s.audited(w, r, "key.revoke", id, "", err)
		return
	}
	s.auditOK(r, "key.revoke", id, http.StatusOK, "tenant="+k.TenantID)
	s.writeJSON(w, r, http.StatusOK, k)
}

// adminUsage answers GET /v1/admin/usage[?tenant=NAME]: every tenant's
// (or one's) use of its quotas, as this node's usage service sees it.
func (s *Server) adminUsage(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	if s.cfg.Usage == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "usage-disabled", "this server keeps no usage"))
		return
	}
	var ts []*airlock.Tenant
	if name := r.URL.Query().Get("tenant"); name != "" {
		t, err := s.cfg.Store.TenantByName(r.Context(), name)
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "tenant-not-found", "tenant %q not found", clipText(name, 100)))
			return
		} else if err != nil {
			s.error(w, r, err)
			return
		}
		ts = []*airlock.Tenant{t}
	} else {
		var err error
		if ts, err = s.cfg.Store.ListTenants(r.Context()); err != nil {
			s.error(w, r, err)
			return
		}
	}
	out := struct {
		Usage []tenantUsage `json:"usage"`
	}{Usage: []tenantUsage{}}
	for _, t := range ts {
		u, err := s.cfg.Usage.Usage(r.Context(), t)
		if err != nil {
			s.error(w, r, err)
			return
		}
		out.Usage = append(out.Usage, tenantUsage{Tenant: t.Name, Usage: u})
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// adminEvents answers GET /v1/admin/events[?tenant=NAME&limit=&before=]:
// abuse events of every tenant (or one), newest first; with ?cursor= the
// event feed of every tenant (or one), oldest first.
func (s *Server) adminEvents(w http.ResponseWriter, r *http.Request) {
	if s.adminDisabled(w, r) {
		return
	}
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), q.Has("limit"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	before := q.Get("before")
	if len(before) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
		return
	}
	f := airlock.AbuseEventFilter{Limit: limit, Before: before}
	if name := q.Get("tenant"); name != "" {
		t, err := s.cfg.Store.TenantByName(r.Context(), name)
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "tenant-not-found", "tenant %q not found", clipText(name, 100)))
			return
		} else if err != nil {
			s.error(w, r, err)
			return
		}
		f.TenantID = t.ID
	}
	if q.Has("cursor") { // the event feed of every tenant (or one)
		s.feed(w, r, f.TenantID)
		return
	}
	page := airlock.AbuseEventPage{Events: []*airlock.AbuseEvent{}}
	if s.cfg.Events != nil {
		evs, err := s.cfg.Events.ListAbuseEvents(r.Context(), f)
		if err != nil {
			s.error(w, r, err)
			return
		}
		if evs != nil {
			page.Events = evs
		}
		if len(evs) == limit {
			page.NextCursor = evs[len(evs)-1].ID
		}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// MarshalJSON sends the tenant with the renamed id under its old name
// as well, for one release (airlock.RenamedFields).
func (a adminTenant) MarshalJSON() ([]byte, error) {
	type plain adminTenant
	return airlock.MarshalWithOldNames("AdminTenant", plain(a))
}

// tenantUsage is one tenant's usage in GET /v1/admin/usage: the Usage
// members and the tenant's name.
type tenantUsage struct {
	Tenant string
	Usage  *airlock.Usage
}

func (t tenantUsage) MarshalJSON() ([]byte, error) {
	return withMember(t.Usage, "tenant", t.Tenant)
}
