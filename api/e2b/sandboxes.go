package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// The control plane: sandboxes as E2B's REST API knows them, on Airlock
// sessions.

// maxControlBody bounds a control-plane request body.
const maxControlBody = 1 << 20

// createRequest is the body of POST /sandboxes and /v2/sandboxes. Members
// Airlock does not act on (secure, autoResume, iam, ...) are accepted and
// ignored; those it cannot honour are refused.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	AutoPause           *bool             `json:"autoPause"`
	// AutoResume is a bool, or an object with "enabled" (bool) or
	// "policy" ("off" or another) (lifecycle.autoResume of the SDKs).
	AutoResume   json.RawMessage `json:"autoResume"`
	MCP          json.RawMessage `json:"mcp"`
	VolumeMounts json.RawMessage `json:"volumeMounts"`
}

// sandboxJSON is E2B's Sandbox: the answer of create and connect.
type sandboxJSON struct {
	TemplateID         string `json:"templateID"`
	SandboxID          string `json:"sandboxID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken"`
	TrafficAccessToken string `json:"trafficAccessToken"`
	Domain             string `json:"domain"`
}

// detailJSON is E2B's SandboxDetail and ListedSandbox.
type detailJSON struct {
	TemplateID          string            `json:"templateID"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           string            `json:"startedAt"`
	EndAt               string            `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int64             `json:"memoryMB"`
	DiskSizeMB          int64             `json:"diskSizeMB"`
	State               string            `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	Metadata            map[string]string `json:"metadata"`
	Domain              string            `json:"domain"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess bool              `json:"allowInternetAccess"`
	Network             *networkJSON      `json:"network,omitempty"`
}

type networkJSON struct {
	AllowOut []string `json:"allowOut"`
	DenyOut  []string `json:"denyOut"`
}

// decodeBody reads a JSON body leniently (unknown members are ignored,
// as E2B's API does) and within maxControlBody. An empty body is {}.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return errorf(400, "could not read the request body")
	}
	if len(b) > maxControlBody {
		return errorf(413, fmt.Sprintf("the request body is larger than %d bytes", maxControlBody))
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(400, "the request body is not valid JSON for this call: "+clip(err.Error(), 200))
	}
	return nil
}

// serveControl routes the control plane.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	pr := s.authenticate(w, r)
	if pr == nil {
		return
	}
	t := pr.Tenant
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, pr))
	p := strings.TrimPrefix(r.URL.Path, "/v2")
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if seg[0] != "sandboxes" {
		s.writeError(w, r, errorf(501, fmt.Sprintf("%s is not implemented by Airlock: its templates are the images of the node (see --e2b-template)", clip(r.URL.Path, 100))))
		return
	}
	var err error
	switch {
	case len(seg) == 1 && r.Method == http.MethodPost:
		err = s.create(w, r, t)
	case len(seg) == 1 && r.Method == http.MethodGet:
		err = s.list(w, r, t)
	case len(seg) == 2 && r.Method == http.MethodGet:
		err = s.info(w, r, t, seg[1])
	case len(seg) == 2 && r.Method == http.MethodDelete:
		err = s.kill(w, r, t, seg[1])
	case len(seg) == 3 && seg[2] == "connect" && r.Method == http.MethodPost:
		err = s.connect(w, r, t, seg[1])
	case len(seg) == 3 && seg[2] == "timeout" && r.Method == http.MethodPost:
		err = s.setTimeout(w, r, t, seg[1])
	case len(seg) == 3 && seg[2] == "network" && r.Method == http.MethodPut:
		err = s.setNetwork(w, r, t, seg[1])
	case len(seg) == 3 && seg[2] == "metrics" && r.Method == http.MethodGet:
		err = s.metrics(w, r, t, seg[1])
	case len(seg) == 3 && (seg[2] == "pause" || seg[2] == "resume" || seg[2] == "fork" || seg[2] == "snapshots" ||
		seg[2] == "logs" || seg[2] == "refreshes"):
		err = errorf(501, fmt.Sprintf("sandbox %s is not implemented by Airlock", seg[2]))
	case len(seg) <= 3:
		err = errorf(405, fmt.Sprintf("%s %s is not a call of the sandboxes API", r.Method, clip(r.URL.Path, 100)))
	default:
		err = errorf(404, "no such path: "+clip(r.URL.Path, 100))
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

// imageFor maps a template to an image.
func (s *Server) imageFor(template string) (string, error) {
	if img, ok := s.templates[template]; ok {
		return img, nil
	}
	names := make([]string, 0, len(s.templates))
	for n := range s.templates {
		names = append(names, n)
	}
	return "", errorf(404, fmt.Sprintf("template %q not found (this node has %s)", clip(template, 100), strings.Join(sorted(names), ", ")))
}

// imageOrTemplate maps an E2B templateID to an image (the node's map)
// or, failing that, to an Airlock template the tenant sees; an unknown
// one is E2B's 404.
func (s *Server) imageOrTemplate(ctx context.Context, t *airlock.Tenant, template string) (string, string, error) {
	img, err := s.imageFor(template)
	if err == nil || s.cfg.UserTemplates == nil {
		return img, "", err
	}
	if _, terr := s.cfg.UserTemplates.ResolveTemplate(ctx, t.ID, template); terr != nil {
		if airlock.ErrorCode(terr) == airlock.ENOTFOUND {
			return "", "", err
		}
		return "", "", terr
	}
	return "", template, nil
}

// checkStrings bounds a map of strings from a request.
func checkStrings(what string, m map[string]string, envNames bool) error {
	if len(m) > 256 {
		return errorf(400, what+": at most 256 entries")
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
		if k == "" || len(k) > 256 || strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
			return errorf(400, fmt.Sprintf("%s: bad entry %q", what, clip(k, 64)))
		}
		if envNames && !validEnvName(k) {
			return errorf(400, fmt.Sprintf("%s: %q is not a valid environment variable name", what, clip(k, 64)))
		}
	}
	if n > 64<<10 {
		return errorf(400, what+": more than 64 KiB in all")
	}
	return nil
}

func validEnvName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// timeoutSeconds clamps a requested timeout to [1, the most left].
func timeoutSeconds(req int64, most int) int {
	if req < 1 {
		req = 1
	}
	return int(min(req, int64(max(most, 1))))
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, t *airlock.Tenant) error {
	var req createRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	switch {
	case len(req.MCP) > 0 && string(req.MCP) != "null":
		return errorf(400, "mcp is not supported by Airlock")
	case len(req.VolumeMounts) > 0 && string(req.VolumeMounts) != "null" && string(req.VolumeMounts) != "[]":
		return errorf(400, "volumeMounts are not supported by Airlock")
	}
	var lifecycle *airlock.SessionLifecycle
	if req.AutoPause != nil && *req.AutoPause {
		// lifecycle {onTimeout: "pause", autoResume}: paused, not killed,
		// at its timeout; autoResume resumes it on the next request.
		lifecycle = &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: autoResume(req.AutoResume)}
	}
	if err := checkStrings("metadata", req.Metadata, false); err != nil {
		return err
	}
	if err := checkStrings("envVars", req.EnvVars, true); err != nil {
		return err
	}
	img, tmpl, err := s.imageOrTemplate(r.Context(), t, req.TemplateID)
	if err != nil {
		return err
	}
	net, err := s.policyFor(t, req.AllowInternetAccess, req.Network)
	if err != nil {
		return err
	}
	maxS := int(s.cfg.MaxLifetime / time.Second)
	timeout := int(s.cfg.DefaultTimeout / time.Second)
	if req.Timeout != nil {
		timeout = timeoutSeconds(*req.Timeout, maxS)
	}
	timeout = min(timeout, maxS)
	sess, _, err := s.cfg.Sessions.CreateSession(r.Context(), t, airlock.CreateSessionRequest{
		Image:        img,
		Template:     tmpl,
		Size:         s.cfg.Size,
		TimeoutS:     timeout,
		IdleTimeoutS: maxS, // E2B sandboxes live to their timeout, busy or not
		Network:      &net,
		Lifecycle:    lifecycle,
	}, "")
	if err != nil {
		return err
	}
	rec := &airlock.E2BSandbox{SandboxID: sess.ID, TenantID: t.ID, TemplateID: req.TemplateID,
		Metadata: req.Metadata, EnvVars: req.EnvVars, CreatedAt: sess.CreatedAt}
	if err := s.cfg.Store.PutE2BSandbox(context.WithoutCancel(r.Context()), rec); err != nil {
		if _, derr := s.cfg.Sessions.DeleteSession(context.WithoutCancel(r.Context()), t, sess.ID); derr != nil {
			s.log.Error("e2b: delete a session whose record failed", "session", sess.ID, "err", derr)
		}
		return err
	}
	if strings.HasPrefix(req.TemplateID, "code-interpreter") {
		// E2B's code interpreter has its Python kernel up when the
		// sandbox is: start the default context now, so the first
		// runCode need not wait for the interpreter.
		go s.prepareContext(t, rec)
	}
	writeJSON(w, http.StatusCreated, s.sandboxJSON(r, rec))
	return nil
}

// prepareContext makes a new sandbox's default Python context.
func (s *Server) prepareContext(t *airlock.Tenant, rec *airlock.E2BSandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref, err := s.resolve(ctx, rec.SandboxID)
	if err == nil {
		_, err = s.defaultContext(ctx, ref, airlock.ContextPython, "python", "")
	}
	if err != nil {
		s.log.Debug("e2b: prepare the default context", "sandbox", rec.SandboxID, "err", err)
	}
}

// principalKey is the context key of the request's key and tenant.
type principalKey struct{}

// keyID returns the ID of the key that authenticated the request.
func keyID(r *http.Request) string {
	if p, _ := r.Context().Value(principalKey{}).(*airlock.Principal); p != nil {
		return p.Key.ID
	}
	return ""
}

// sandboxJSON describes the sandbox with tokens issued to the request's
// key.
func (s *Server) sandboxJSON(r *http.Request, rec *airlock.E2BSandbox) sandboxJSON {
	return sandboxJSON{
		TemplateID:         rec.TemplateID,
		SandboxID:          rec.SandboxID,
		ClientID:           s.cfg.ClientID,
		EnvdVersion:        EnvdVersion,
		EnvdAccessToken:    s.token(purposeEnvd, rec.SandboxID, keyID(r)),
		TrafficAccessToken: s.token(purposeTraffic, rec.SandboxID, keyID(r)),
		Domain:             s.cfg.Domain,
	}
}

func notFound(id string) error {
	return errorf(404, fmt.Sprintf("sandbox %q not found", clip(id, 100)))
}

// liveSandbox returns the tenant's live session and its record (made on
// the spot for a session of the native API, the first time E2B's API
// names it). Another tenant's sandbox, an ended one and one that never
// was are the same 404.
func (s *Server) liveSandbox(ctx context.Context, t *airlock.Tenant, id string) (*airlock.Session, *airlock.E2BSandbox, error) {
	if id == "" || len(id) > 128 {
		return nil, nil, notFound(id)
	}
	sess, err := s.cfg.Sessions.Session(ctx, t, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, nil, notFound(id)
	}
	if err != nil {
		return nil, nil, err
	}
	if (!sess.State.Live() && sess.State != airlock.SessionPaused) || sess.State == airlock.SessionCreating {
		return nil, nil, notFound(id)
	}
	rec, err := s.cfg.Store.E2BSandbox(ctx, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		rec = &airlock.E2BSandbox{SandboxID: id, TenantID: t.ID, TemplateID: sess.Image, CreatedAt: sess.CreatedAt}
		err = s.cfg.Store.PutE2BSandbox(ctx, rec)
	}
	if err != nil {
		return nil, nil, err
	}
	if rec.TenantID != t.ID {
		return nil, nil, notFound(id)
	}
	return sess, rec, nil
}

// detail describes the session; with a request, it carries the envd
// token issued to the request's key.
func (s *Server) detail(sess *airlock.Session, rec *airlock.E2BSandbox, r *http.Request) detailJSON {
	d := detailJSON{
		TemplateID:          rec.TemplateID,
		SandboxID:           sess.ID,
		ClientID:            s.cfg.ClientID,
		StartedAt:           sess.CreatedAt.UTC().Format(time.RFC3339Nano),
		EndAt:               sess.ExpiresAt.UTC().Format(time.RFC3339Nano),
		CPUCount:            int(math.Ceil(sess.Limits.CPUs)),
		MemoryMB:            sess.Limits.MemoryBytes >> 20,
		DiskSizeMB:          sess.Limits.DiskBytes / 1000 / 1000,
		State:               e2bState(sess.State),
		EnvdVersion:         EnvdVersion,
		Metadata:            rec.Metadata,
		Domain:              s.cfg.Domain,
		AllowInternetAccess: sess.Network.HasNetwork(),
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	if sess.Network.HasNetwork() {
		d.Network = &networkJSON{AllowOut: append([]string{}, sess.Network.Allow...), DenyOut: []string{}}
	}
	if r != nil {
		d.EnvdAccessToken = s.token(purposeEnvd, sess.ID, keyID(r))
	}
	return d
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	sess, rec, err := s.liveSandbox(r.Context(), t, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(sess, rec, r))
	return nil
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	if _, _, err := s.liveSandbox(r.Context(), t, id); err != nil {
		return err
	}
	if _, err := s.cfg.Sessions.DeleteSession(r.Context(), t, id); err != nil {
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			return notFound(id)
		}
		return err
	}
	s.forget(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// extend makes the sandbox end timeoutS seconds from now, clamped to its
// maximum lifetime; with onlyLonger, never earlier than it ends now.
func (s *Server) extend(ctx context.Context, t *airlock.Tenant, sess *airlock.Session, timeoutS int64, onlyLonger bool) error {
	now := s.cfg.Now()
	limit := sess.CreatedAt.Add(time.Duration(sess.Limits.MaxLifetimeS) * time.Second)
	left := int(limit.Sub(now) / time.Second)
	secs := timeoutSeconds(timeoutS, left)
	if onlyLonger && !now.Add(time.Duration(secs)*time.Second).After(sess.ExpiresAt) {
		return nil
	}
	_, err := s.cfg.Sessions.ExtendSession(ctx, t, sess.ID, secs)
	if secs == left && secs > 1 && airlock.ErrorCode(err) == airlock.EINVALID {
		// Clamped to the most left, and a second went by before the
		// session service counted what is left: one less.
		_, err = s.cfg.Sessions.ExtendSession(ctx, t, sess.ID, secs-1)
	}
	return err
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Timeout == nil {
		return errorf(400, "timeout (seconds) is required")
	}
	sess, _, err := s.liveSandbox(r.Context(), t, id)
	if err != nil {
		return err
	}
	if err := s.extend(r.Context(), t, sess, *req.Timeout, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	sess, rec, err := s.liveSandbox(r.Context(), t, id)
	if err != nil {
		return err
	}
	if sess.State == airlock.SessionPaused {
		// Connect resumes a paused sandbox, as E2B's does.
		k, ok := s.cfg.Sessions.(airlock.KeepService)
		if !ok {
			return errorf(409, "sandbox is paused and this server cannot resume it")
		}
		if sess, err = k.ResumeSession(r.Context(), t, id); err != nil && airlock.ErrorCode(err) != airlock.ECONFLICT {
			return err
		} else if err != nil {
			if sess, _, err = s.liveSandbox(r.Context(), t, id); err != nil {
				return err
			}
		}
	}
	if req.Timeout != nil {
		if err := s.extend(r.Context(), t, sess, *req.Timeout, true); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, s.sandboxJSON(r, rec))
	return nil
}

func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	var req networkConfig
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	sess, _, err := s.liveSandbox(r.Context(), t, id)
	if err != nil {
		return err
	}
	p, err := s.policyFor(t, req.AllowInternetAccess, &req)
	if err != nil {
		return err
	}
	if !sess.Network.HasNetwork() {
		// Made without a network (allow_internet_access false, or a
		// tenant without a default allow list), and a running sandbox
		// cannot get one: a list that reaches nothing is what it has;
		// one that names hosts cannot be honoured.
		if len(p.Allow) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return errorf(http.StatusConflict, fmt.Sprintf("sandbox %s was created without a network (allow_internet_access false, or no default allow list for this API key's tenant), and a running sandbox cannot get one: create it with a network section (network: {} or network.allowOut) to change its allow list later", id))
	}
	if _, err := s.cfg.Sessions.SetSessionNetwork(r.Context(), t, id, p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// list answers GET /sandboxes and /v2/sandboxes: the tenant's running
// sandboxes made or opened through this API, newest first, filtered by
// metadata, paginated by X-Next-Token.
func (s *Server) list(w http.ResponseWriter, r *http.Request, t *airlock.Tenant) error {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errorf(400, "limit must be a positive integer")
		}
		limit = min(n, 100)
	}
	want, err := parseMetadataQuery(q["metadata"])
	if err != nil {
		return err
	}
	if states := splitList(q["state"]); len(states) > 0 && !contains(states, "running") {
		writeJSON(w, http.StatusOK, []detailJSON{}) // Airlock never pauses a sandbox
		return nil
	}
	template := q.Get("template")
	cursor := q.Get("nextToken")
	if len(cursor) > 128 {
		return errorf(400, "bad nextToken")
	}
	out := []detailJSON{}
	next, more := "", false
scan:
	for {
		page, err := s.cfg.Sessions.ListSessions(r.Context(), t, airlock.SessionFilter{LiveOnly: true, Limit: 50, Before: cursor})
		if err != nil {
			return err
		}
		for _, sess := range page.Sessions {
			if !sess.State.Live() || sess.State == airlock.SessionCreating {
				continue
			}
			rec, err := s.cfg.Store.E2BSandbox(r.Context(), sess.ID)
			if airlock.ErrorCode(err) == airlock.ENOTFOUND || err == nil && rec.TenantID != t.ID {
				continue
			}
			if err != nil {
				return err
			}
			if !matches(rec.Metadata, want) || template != "" && rec.TemplateID != template {
				continue
			}
			if len(out) == limit {
				more = true
				break scan
			}
			out = append(out, s.detail(sess, rec, nil))
			next = sess.ID
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if more {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseMetadataQuery reads the metadata filter: one query parameter
// holding "k=v&k2=v2", whose keys and values the SDKs URL-encode once
// more.
func parseMetadataQuery(vals []string) (map[string]string, error) {
	want := map[string]string{}
	for _, raw := range vals {
		if len(raw) > 8<<10 {
			return nil, errorf(400, "metadata filter too long")
		}
		pairs, err := url.ParseQuery(raw)
		if err != nil {
			return nil, errorf(400, "metadata must be URL-encoded key=value pairs")
		}
		for k, vs := range pairs {
			key := unescape(k)
			for _, v := range vs {
				want[key] = unescape(v)
			}
		}
	}
	return want, nil
}

func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// splitList reads a parameter sent repeated (Python) or comma-joined (JS).
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(l []string) []string {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j] < l[j-1]; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	return l
}

// autoResume reads E2B's autoResume: true, {"enabled": true} or a
// {"policy": ...} other than "off".
func autoResume(raw json.RawMessage) bool {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var o struct {
		Enabled *bool  `json:"enabled"`
		Policy  string `json:"policy"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return false
	}
	if o.Enabled != nil {
		return *o.Enabled
	}
	return o.Policy != "" && o.Policy != "off"
}

// e2bState is E2B's state of a session: "paused" or "running".
func e2bState(st airlock.SessionState) string {
	if st == airlock.SessionPaused {
		return "paused"
	}
	return "running"
}
